/**
 * Status conditions, one entry per type, updated in place: lastTransitionTime moves only when the
 * status flips, so a reconcile that finds nothing new writes nothing (and wakes nobody).
 */
import type { Condition } from './types.js';

/**
 * Types the reconciler sets (seed 004's Created/Running/Restarting/Failed, plus Ready/Degraded,
 * and DataDrift once the edge reports a drift test).
 */
type ConditionType =
  'Ready' | 'Created' | 'Running' | 'Restarting' | 'Failed' | 'Degraded' | 'DataDrift';

interface ConditionState {
  type: ConditionType;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** `current` with `next` applied, in the order the types are listed above. */
function mergeConditions(
  current: readonly Condition[] | undefined,
  next: readonly ConditionState[],
  now: string,
): Condition[] {
  const byType = new Map((current ?? []).map((c) => [c.type, c]));
  const merged: Condition[] = next.map((state) => {
    const previous = byType.get(state.type);
    byType.delete(state.type);
    const lastTransitionTime =
      previous !== undefined && previous.status === state.status && previous.lastTransitionTime
        ? previous.lastTransitionTime
        : now;
    return { ...state, lastTransitionTime };
  });
  // Types someone else set are kept as they are.
  return [...merged, ...byType.values()];
}

/** The condition of a type, if present. */
function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

export { mergeConditions, findCondition };
export type { ConditionType, ConditionState };
