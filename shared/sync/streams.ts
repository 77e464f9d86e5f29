/**
 * Task delivery through Redis: one stream per edge node, consumed by the node with a consumer
 * group (an entry stays pending until acknowledged and is delivered again after a crash). One
 * script per (node, service), lua/offer.lua, decides from the stored version whether the task is
 * new: a redelivered or reordered ApiServerSource event, or a status-only update, appends
 * nothing, and a service can leave a node and come back.
 * `current` holds each service's latest task for a node that starts from nothing.
 */
import type { KubeObject } from '../k8s/index.js';
// The key layout and the record are the edge's contract too (shared/messages/edge-task.ts).
import { nodeKeys } from '../messages/edge-task.js';
import type { EdgeTask } from '../messages/edge-task.js';
import { runScript } from '../redis/index.js';
import type { RedisClient } from '../redis/index.js';
import { confirm, forget, offer, pending } from './lua/index.js';
import type { Operation, Task } from './task.js';
import { taskVersion } from './task.js';

/** The record stored for the edge: the task without what only this side uses. */
function edgeTaskRecord(task: Omit<Task, 'operation'>): EdgeTask {
  return {
    namespace: task.namespace,
    name: task.name,
    uid: task.uid,
    generation: task.generation,
    resource: task.resource,
  };
}

interface Offer {
  /** A new entry went into the node's stream. */
  appended: boolean;
  /** The operation this version stands for ('' when nothing is new). */
  operation: Operation | '';
  /** The node's local controller already has this version. */
  localControllerUpToDate: boolean;
  /**
   * The stored version ("state|uid|generation|created"; '' when nothing is stored) to confirm
   * after a local-controller delivery.
   */
  version: string;
}

/*
 * Local-controller deliveries of one (node, service) by racing replicas can land out of order: a
 * replica's POST of generation 2 may reach the LC after another replica delivered and confirmed
 * generation 3. So a delivery always sends the stored version, and is confirmed only if that is
 * still the stored version (compare-and-set). A failed confirmation of an older version means
 * this delivery may have overwritten a newer one: it clears the record (the LC holds an unknown
 * version) and bumps the epoch, so a confirmation of a delivery that was sent before, and may
 * have landed before, fails too. Whoever fails delivers the stored version again. (Scripts
 * lua/pending.lua, confirm.lua and forget.lua.)
 */

/** What a node's local controller is to be sent for a service: the stored version. */
interface LocalControllerPending {
  /** The stored version ("state|uid|generation|created"; '' when nothing is stored). */
  version: string;
  /** The local controller's confirmed version is this one: nothing to send. */
  upToDate: boolean;
  /** The stored resource of an insert or update (a removal keeps none). */
  resource: KubeObject | undefined;
  /** Hand back to confirmLocalController unchanged. */
  epoch: string;
}

/** The local controller's operation for a stored version's state (unplace: a delete). */
function storedOperation(version: string): Operation | undefined {
  const state = version.split('|')[0];
  if (state === 'insert' || state === 'update' || state === 'delete') return state;
  return state === 'unplace' ? 'delete' : undefined;
}

/** Where an event puts the service relative to one node. */
type Placement = 'present' | 'absent' | 'deleted';

interface TaskStreams {
  offer(node: string, task: Omit<Task, 'operation'> & { placement: Placement }): Promise<Offer>;
  /** The version the node's local controller should have now, and whether it is confirmed. */
  localControllerPending(node: string, service: string): Promise<LocalControllerPending>;
  /**
   * Records that the node's local controller acknowledged `pending.version`; false when that is
   * no longer the stored version, or a delivery since `pending` was read may have overwritten
   * it: send the stored version again.
   */
  confirmLocalController(
    node: string,
    service: string,
    pending: Pick<LocalControllerPending, 'version' | 'epoch'>,
  ): Promise<boolean>;
  /** A delivery failed but may still land: the next sync must send the stored version again. */
  forgetLocalController(node: string, service: string): Promise<void>;
}

function createTaskStreams(redis: RedisClient, options: { maxLength: number }): TaskStreams {
  return {
    offer(node, task) {
      const k = nodeKeys(node);
      const service = `${task.namespace}/${task.name}`;
      return runScript(
        redis,
        offer,
        [
          k.stream,
          k.versions,
          k.current,
          k.localController,
          k.dead,
          service,
          task.uid,
          String(task.generation),
          task.placement,
          JSON.stringify(edgeTaskRecord(task)),
          String(options.maxLength),
          task.created,
        ],
        (reply) => {
          const [appended, operation, upToDate, version] = reply as [
            number,
            string,
            number,
            string,
          ];
          return {
            appended: appended === 1,
            operation: operation as Operation | '',
            localControllerUpToDate: upToDate === 1,
            version,
          };
        },
      );
    },
    localControllerPending(node, service) {
      const k = nodeKeys(node);
      return runScript(
        redis,
        pending,
        [k.versions, k.current, k.localController, k.localControllerEpoch, service],
        (reply) => {
          const [version, upToDate, body, epoch] = reply as [string, number, string, string];
          const stored =
            body === '' ? undefined : (JSON.parse(body) as { resource: KubeObject }).resource;
          return { version, upToDate: upToDate === 1, resource: stored, epoch };
        },
      );
    },
    confirmLocalController(node, service, pending) {
      const k = nodeKeys(node);
      return runScript(
        redis,
        confirm,
        [
          k.versions,
          k.localController,
          k.localControllerEpoch,
          service,
          pending.version,
          pending.epoch,
        ],
        (reply) => reply === 1,
      );
    },
    forgetLocalController(node, service) {
      const k = nodeKeys(node);
      return runScript(
        redis,
        forget,
        [k.localController, k.localControllerEpoch, service],
        () => undefined,
      );
    },
  };
}

export { createTaskStreams, storedOperation, taskVersion };
export type { TaskStreams, Offer, Placement, LocalControllerPending };
