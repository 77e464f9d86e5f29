/**
 * Status conditions, one entry per type, updated in place: lastTransitionTime moves only when the
 * status flips, so a reconcile that finds nothing new writes nothing (and wakes nobody). Every kind
 * tells of its conditions' changes with the same events: a warning for trouble, Normal for
 * recovery.
 */
import { event } from './actions.js';
import type { EventAction } from './actions.js';
import type { Condition } from './types.js';

/**
 * Types the reconciler sets (seed 004's Created/Running/Restarting/Failed, plus Ready/Degraded,
 * and DataDrift once the edge reports a drift test).
 */
type ConditionType =
  | 'Ready'
  | 'Created'
  | 'Running'
  | 'Restarting'
  | 'Succeeded'
  | 'Failed'
  | 'Degraded'
  | 'DataDrift';

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

/** The status that is trouble for a type (a Warning event), where one is. */
const troubleAt: Partial<Record<ConditionType, ConditionState['status']>> = {
  Ready: 'False',
  Created: 'False',
  Degraded: 'True',
  DataDrift: 'True',
};

/** The event for one condition's change from `before`, if the change is news. */
function transitionEvent(
  before: { status: string } | undefined,
  state: ConditionState,
): EventAction | undefined {
  const { type, status, message } = state;
  if (troubleAt[type] === status)
    return event('Warning', type === 'DataDrift' ? 'DataDrift' : state.reason, message);
  if (type === 'Ready' && status === 'True') return event('Normal', 'Ready', message);
  if (type === 'Succeeded' && status === 'True') return event('Normal', state.reason, message);
  // Only a drift that ends is news: a first report of no drift says nothing happened.
  if (type === 'DataDrift' && status === 'False' && before?.status === 'True')
    return event('Normal', 'NoDrift', message);
  return undefined;
}

/** Events for the conditions whose status or reason changed from `previous`. */
function transitionEvents(
  previous: readonly Condition[] | undefined,
  next: readonly ConditionState[],
): EventAction[] {
  const events: EventAction[] = [];
  for (const state of next) {
    const before = findCondition(previous, state.type);
    if (before?.status === state.status && before.reason === state.reason) continue;
    const news = transitionEvent(before, state);
    if (news !== undefined) events.push(news);
  }
  return events;
}

export { mergeConditions, findCondition, transitionEvents };
export type { ConditionType, ConditionState };
