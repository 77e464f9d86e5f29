/**
 * The task downstream-sync sends to an edge node: seed 000's "body same as the task CRD", with
 * the operation and the version (uid, generation) that orders deliveries. Updates are tasks too
 * (Sedna's edge drops them); a delete carries the last spec so the edge knows what it removes.
 * What is stored for the edge is the record of shared/messages/edge-task.ts.
 */
import type { KubeObject } from '../k8s/index.js';
import type { EdgeTask } from '../messages/edge-task.js';

const operations = ['insert', 'update', 'delete'] as const;
type Operation = (typeof operations)[number];

interface Task extends EdgeTask {
  operation: Operation;
  /** The resource as the API server had it (status dropped: it is not the edge's business). */
  resource: KubeObject;
  /** metadata.creationTimestamp: which of two objects of one name is the newer. */
  created: string;
}

/** `uid:generation`, the order deliveries are checked against. */
function taskVersion(task: Pick<Task, 'uid' | 'generation'>): string {
  return `${task.uid}:${task.generation}`;
}

/** The task for an ApiServerSource event about `object`; `deleted` for delete events. */
function taskOf(
  object: KubeObject,
  deleted: boolean,
): Omit<Task, 'operation'> & { deleted: boolean } {
  const { status: _status, ...resource } = object;
  return {
    namespace: object.metadata.namespace ?? '',
    name: object.metadata.name,
    uid: object.metadata.uid ?? '',
    generation: object.metadata.generation ?? 0,
    resource: resource,
    created: object.metadata.creationTimestamp ?? '',
    deleted,
  };
}

export { operations, taskVersion, taskOf };
export type { Operation, Task };
