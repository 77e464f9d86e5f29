/**
 * The thin adapter that carries out reconcile()'s actions through the Kubernetes client. The
 * status write goes first and is conditional: when it conflicts, the pass was decided on stale
 * data, so nothing else is written and the caller decides again from a fresh read.
 */
import { randomBytes } from 'node:crypto';
import { ConflictError, NotFoundError } from '../errors/index.js';
import { apiVersion, kinds } from '../k8s/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import type { Logger } from '../telemetry/index.js';
import type { Action } from './actions.js';
import type { OwnerKind } from './ownership.js';

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
  /** The kind of the resource whose status is written and which the events are about. */
  owner: OwnerKind;
}

function eventObject(
  service: KubeObject,
  action: Extract<Action, { kind: 'event' }>,
  context: ApplyContext,
) {
  const owner = kinds[context.owner];
  const time = context.now().toISOString();
  return {
    metadata: {
      // Kubernetes names events <object>.<unique suffix>.
      name: `${service.metadata.name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`,
    },
    involvedObject: {
      apiVersion: apiVersion(owner),
      kind: owner.kind,
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

/** One write other than the status; false when the action is not one. */
async function write(
  kube: Kube,
  service: KubeObject,
  action: Action,
  context: ApplyContext,
): Promise<boolean> {
  const namespace = service.metadata.namespace ?? '';
  if (action.kind === 'create') await kube.create('knativeService', namespace, action.object);
  else if (action.kind === 'update')
    await kube.patch({ kind: 'knativeService', namespace, name: action.name }, action.patch);
  else if (action.kind === 'delete')
    await kube.delete({ kind: 'knativeService', namespace, name: action.name });
  else if (action.kind === 'patchModel')
    await kube.patch({ kind: 'model', namespace, name: action.name }, action.patch);
  else if (action.kind === 'event')
    await kube.create('event', namespace, eventObject(service, action, context));
  else return false;
  return true;
}

async function applyActions(
  kube: Kube,
  service: KubeObject,
  actions: readonly Action[],
  context: ApplyContext,
): Promise<ApplyResult> {
  const namespace = service.metadata.namespace ?? '';
  const kind = context.owner;
  const ref = { kind, namespace, name: service.metadata.name };
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
      if (await write(kube, service, action, context)) writes += 1;
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
