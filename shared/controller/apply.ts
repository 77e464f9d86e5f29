/**
 * The thin adapter that carries out reconcile()'s actions through the Kubernetes client. The
 * status write goes first and is conditional: when it conflicts, the pass was decided on stale
 * data, so nothing else is written and the caller decides again from a fresh read.
 */
import { randomBytes } from 'node:crypto';
import { ConflictError, NotFoundError } from '../errors/index.js';
import { apiVersion, kinds } from '../k8s/index.js';
import type { Kube } from '../k8s/index.js';
import type { Logger } from '../telemetry/index.js';
import type { Action } from './reconcile.js';
import type { ServiceObject } from './types.js';

interface ApplyResult {
  /** API writes made (events included). */
  writes: number;
  /** The status write met a concurrent change: decide again from a fresh read. */
  conflict: boolean;
}

interface ApplyContext {
  log: Logger;
  now: () => Date;
  /** Names the writer in Kubernetes Events. */
  component: string;
}

function eventObject(
  service: ServiceObject,
  action: Extract<Action, { kind: 'event' }>,
  context: ApplyContext,
) {
  const time = context.now().toISOString();
  return {
    metadata: {
      // Kubernetes names events <object>.<unique suffix>.
      name: `${service.metadata.name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`,
    },
    involvedObject: {
      apiVersion: apiVersion(kinds.jointInferenceService),
      kind: kinds.jointInferenceService.kind,
      name: service.metadata.name,
      namespace: service.metadata.namespace,
      uid: service.metadata.uid,
    },
    type: action.type,
    reason: action.reason,
    message: action.message.slice(0, 1024),
    source: { component: context.component },
    reportingComponent: `edgeai.io/${context.component}`,
    firstTimestamp: time,
    lastTimestamp: time,
    count: 1,
  };
}

async function applyActions(
  kube: Kube,
  service: ServiceObject,
  actions: readonly Action[],
  context: ApplyContext,
): Promise<ApplyResult> {
  const namespace = service.metadata.namespace ?? '';
  const ref = { kind: 'jointInferenceService' as const, namespace, name: service.metadata.name };
  let writes = 0;
  for (const action of actions) {
    if (action.kind !== 'status') continue;
    try {
      await kube.patchStatus(ref, {
        metadata: { resourceVersion: action.resourceVersion },
        status: action.status,
      });
      writes += 1;
    } catch (err) {
      if (err instanceof ConflictError) return { writes, conflict: true };
      // Deleted since it was read: its workers go with it (garbage collection).
      if (err instanceof NotFoundError) return { writes, conflict: false };
      throw err;
    }
  }
  for (const action of actions) {
    try {
      if (action.kind === 'create') {
        await kube.create('knativeService', namespace, action.object);
      } else if (action.kind === 'update') {
        await kube.patch({ kind: 'knativeService', namespace, name: action.name }, action.patch);
      } else if (action.kind === 'event') {
        await kube.create('event', namespace, eventObject(service, action, context));
      } else continue;
      writes += 1;
    } catch (err) {
      // Someone else created it or it vanished meanwhile: the next pass sees the new state.
      if (err instanceof ConflictError || err instanceof NotFoundError) {
        context.log.warn(
          { err: err.message, action: action.kind, service: ref.name },
          'write skipped',
        );
        continue;
      }
      // Events explain; they must not fail the reconcile that they describe.
      if (action.kind === 'event') {
        context.log.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'event not recorded',
        );
        continue;
      }
      throw err;
    }
  }
  return { writes, conflict: false };
}

export { applyActions };
export type { ApplyResult, ApplyContext };
