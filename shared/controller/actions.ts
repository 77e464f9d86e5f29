/**
 * What a kind's decision asks the engine to write, and the two rules every kind's status follows:
 * only the fields that differ are written, and lastReconcileTime is rewritten when nothing else is
 * only once it is older than the heartbeat. A pass that finds nothing new writes nothing, so the
 * controller's own status writes do not wake it up forever through its ApiServerSource.
 */
import { isDeepStrictEqual } from 'node:util';
import type { KubeObject } from '../k8s/index.js';

/** An event about the owner. */
type EventAction = { kind: 'event'; type: 'Normal' | 'Warning'; reason: string; message: string };

/**
 * One write. Service writes carry the kind's `Tag` (a JointInferenceService's role, a graph's
 * node) for its events and tests. Applied in order: the status first, conditional on
 * `resourceVersion` (a concurrent writer makes it fail and the pass re-run from fresh reads),
 * then the Services, then the events.
 */
type Action<Tag extends object = object> =
  | ({ kind: 'create'; object: KubeObject } & Tag)
  | ({ kind: 'update'; name: string; patch: Record<string, unknown> } & Tag)
  | { kind: 'delete'; name: string }
  /** A Model the resource updates (a finished federated job publishes the model it made). */
  | { kind: 'patchModel'; name: string; patch: Record<string, unknown> }
  | { kind: 'status'; resourceVersion: string; status: Record<string, unknown> }
  | EventAction;

interface DecideOptions {
  /** Rewrite lastReconcileTime when it is older than this, even if nothing else changed. */
  heartbeatMs: number;
}

function event(type: EventAction['type'], reason: string, message: string): EventAction {
  return { kind: 'event', type, reason, message };
}

/** The fields of `wanted` whose value differs from `previous`'s (undefined: null, to remove it). */
function changedFields(
  previous: object,
  wanted: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(wanted)) {
    if (!isDeepStrictEqual((previous as Record<string, unknown>)[k], v)) patch[k] = v ?? null;
  }
  return patch;
}

/** The status write for `patch`, or none when it is empty and the heartbeat is not due. */
function statusAction(
  owner: KubeObject & { status?: { lastReconcileTime?: string | undefined } },
  patch: Record<string, unknown>,
  now: Date,
  options: DecideOptions,
): Extract<Action, { kind: 'status' }> | undefined {
  const previous = owner.status?.lastReconcileTime;
  const last = previous === undefined ? 0 : Date.parse(previous);
  const heartbeatDue = now.getTime() - last >= options.heartbeatMs;
  if (Object.keys(patch).length === 0 && !heartbeatDue) return undefined;
  return {
    kind: 'status',
    resourceVersion: owner.metadata.resourceVersion ?? '',
    status: { ...patch, lastReconcileTime: now.toISOString() },
  };
}

export { event, changedFields, statusAction };
export type { Action, EventAction, DecideOptions };
