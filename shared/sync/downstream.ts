/**
 * downstream-sync: an ApiServerSource event about a JointInferenceService becomes a task for
 * each of its edge nodes. The stream side is idempotent and order-proof (streams.ts); the
 * local-controller side is retried by redelivery until the node acknowledged the version. Nodes
 * the service leaves (nodeName changed, a nodeSelector stops matching) get a delete, and stay in
 * the service's node set until their local controller has it.
 */
import { placementNodes } from '../controller/index.js';
import { UnavailableError } from '../errors/index.js';
import { findObject } from '../k8s/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import type { RedisClient } from '../redis/index.js';
import { hashTag, key } from '../redis/index.js';
import type { LocalControllerClient } from './local-controller.js';
import { localControllerUrl } from './local-controller.js';
import { storedOperation } from './streams.js';
import type { Placement, TaskStreams } from './streams.js';
import { taskOf } from './task.js';
import type { Task } from './task.js';

/** Delivery turns of one sync before it leaves the rest to a redelivery of the event. */
const maxDeliveryTurns = 3;

interface NodeDelivery {
  node: string;
  operation: string;
  stream: 'appended' | 'unchanged';
  localController: 'delivered' | 'up-to-date' | 'not-configured' | 'node-missing';
}

/** What a resync did: services offered again, deletes made up for, services left to retry. */
interface ResyncResult {
  offered: number;
  deleted: number;
  failed: number;
}

interface SyncResult {
  namespace: string;
  name: string;
  uid: string;
  generation: number;
  deliveries: NodeDelivery[];
}

interface Deps {
  kube: Kube;
  redis: RedisClient;
  streams: TaskStreams;
  localControllers: LocalControllerClient;
}

/** A task as an event makes it, before it is placed on a node. */
type ServiceTask = Omit<Task, 'operation' | 'placement'>;

const nodesKey = (namespace: string, name: string) =>
  key('tasks', hashTag(`${namespace}/${name}`), 'nodes');
// Every service synced and not yet deleted everywhere: `namespace/name` -> its last object.
// The resync delivers the delete of one that is gone when its delete event was lost.
const registryKey = key('tasks', 'services');

/**
 * Sends the node's local controller the stored version (which may be newer than `task`: a
 * stale event must still repair an LC another replica's late delivery left behind) until a
 * confirmation holds (streams.ts says why one fails). Each failed turn means a newer version
 * was stored, or a late delivery reported, during its POST; past a few, a redelivery of the
 * event finishes the job, as the LC's record is no longer up to date.
 */
async function deliverStored(
  { streams, localControllers }: Deps,
  base: URL,
  node: string,
  task: ServiceTask,
): Promise<{ version: string; delivered: boolean }> {
  const service = `${task.namespace}/${task.name}`;
  let delivered = false;
  for (let turn = 0; turn < maxDeliveryTurns; turn += 1) {
    const pending = await streams.localControllerPending(node, service);
    const operation = storedOperation(pending.version);
    if (pending.upToDate || operation === undefined) return { version: pending.version, delivered };
    const [, uid = task.uid, generation, created = task.created] = pending.version.split('|');
    // A removal has no stored resource; its DELETE sends none either.
    const resource = pending.resource ?? task.resource;
    const sent: Task = {
      ...task,
      uid,
      generation: Number(generation),
      created,
      resource,
      operation,
    };
    try {
      await localControllers.deliver(base, sent, node);
    } catch (err) {
      await streams.forgetLocalController(node, service).catch(() => undefined);
      throw err;
    }
    delivered = true;
    if (await streams.confirmLocalController(node, service, pending))
      return { version: pending.version, delivered };
  }
  throw new UnavailableError(
    `local controller of node ${node}: ${service} kept changing while it was delivered`,
    2,
  );
}

/**
 * Where the service's task goes: its nodes now (a delete when the service is deleted), and a
 * delete to the nodes sent it before but no longer selected, or whose local controller has not
 * yet acknowledged an earlier removal (they stay in the set).
 */
async function targetsOf(
  { kube, redis }: Deps,
  object: KubeObject,
  task: ServiceTask,
  deleted: boolean,
): Promise<Map<string, Placement>> {
  const spec = object['spec'] as
    { edgeWorker?: { nodeName?: string; nodeSelector?: Record<string, string> } } | undefined;
  const edge = spec?.edgeWorker ?? {};
  const selecting = edge.nodeName === undefined && edge.nodeSelector !== undefined;
  const allNodes = selecting ? (await kube.list('node')).items : [];
  const wanted = new Set(placementNodes(edge, allNodes) ?? []);
  const previous = await redis.smembers(nodesKey(task.namespace, task.name));
  const targets = new Map<string, Placement>();
  for (const node of wanted) targets.set(node, deleted ? 'deleted' : 'present');
  for (const node of previous)
    if (!wanted.has(node)) targets.set(node, deleted ? 'deleted' : 'absent');
  return targets;
}

interface NodeOutcome {
  delivery: NodeDelivery;
  /** The stored state (not this event: a stale event changes nothing) has the service here. */
  onNode: boolean;
  /** The node no longer has the service, and its local controller knows. */
  cleared: boolean;
  /** The local controller could not be brought up to date (the stream has the task). */
  failure?: UnavailableError;
}

/** Offers one node its task and brings its local controller up to date. */
async function syncNode(
  deps: Deps,
  node: string,
  placement: Placement,
  task: ServiceTask,
): Promise<NodeOutcome> {
  const offer = await deps.streams.offer(node, { ...task, placement });
  const delivery: NodeDelivery = {
    node,
    operation: offer.operation,
    stream: offer.appended ? 'appended' : 'unchanged',
    localController: 'up-to-date',
  };
  const operation = storedOperation(offer.version);
  const onNode = operation === 'insert' || operation === 'update';
  if (offer.localControllerUpToDate || operation === undefined)
    return { delivery, onNode, cleared: !onNode && offer.localControllerUpToDate };
  const nodeObject = await findObject(deps.kube, { kind: 'node', name: node });
  const base = nodeObject === undefined ? undefined : localControllerUrl(nodeObject);
  if (base === undefined) {
    delivery.localController = nodeObject === undefined ? 'node-missing' : 'not-configured';
    return { delivery, onNode, cleared: !onNode };
  }
  try {
    const sent = await deliverStored(deps, base, node, task);
    if (sent.delivered) delivery.localController = 'delivered';
    return { delivery, onNode, cleared: storedOperation(sent.version) === 'delete' };
  } catch (err) {
    if (!(err instanceof UnavailableError)) throw err;
    return { delivery, onNode, cleared: false, failure: err };
  }
}

/** Adds the nodes that have the service to its node set and removes the cleared ones. */
async function recordNodes(
  { redis, streams }: Deps,
  task: ServiceTask,
  placed: readonly string[],
  cleared: readonly string[],
): Promise<void> {
  const set = nodesKey(task.namespace, task.name);
  if (placed.length > 0) await redis.sadd(set, ...placed);
  if (cleared.length === 0) return;
  await redis.srem(set, ...cleared);
  // Another replica may have placed the service on a cleared node meanwhile (the set and the
  // nodes' versions live in different hash slots, so no one script can do both).
  const service = `${task.namespace}/${task.name}`;
  for (const node of cleared) {
    const { version } = await streams.localControllerPending(node, service);
    const operation = storedOperation(version);
    if (operation === 'insert' || operation === 'update') await redis.sadd(set, node);
  }
}

/** Keeps the registry the resync reads: a live service's last object, gone with the service. */
async function register({ redis }: Deps, task: ServiceTask, deleted: boolean): Promise<void> {
  const service = `${task.namespace}/${task.name}`;
  if (!deleted) {
    await redis.hset(registryKey, service, JSON.stringify(task.resource));
    return;
  }
  // Only the object this delete is about: a same-name successor stays registered.
  const registered = await redis.hget(registryKey, service);
  const last = registered === null ? undefined : (JSON.parse(registered) as KubeObject);
  if (last?.metadata.uid === task.uid) await redis.hdel(registryKey, service);
}

/** One ApiServerSource event: the service's task to each of its nodes (see the file comment). */
async function sync(deps: Deps, object: KubeObject, deleted: boolean): Promise<SyncResult> {
  const task = taskOf(object, deleted);
  const deliveries: NodeDelivery[] = [];
  const placed: string[] = [];
  const cleared: string[] = [];
  let failure: UnavailableError | undefined;
  for (const [node, placement] of await targetsOf(deps, object, task, deleted)) {
    const outcome = await syncNode(deps, node, placement, task);
    deliveries.push(outcome.delivery);
    if (outcome.onNode) placed.push(node);
    if (outcome.cleared) cleared.push(node);
    failure ??= outcome.failure;
  }
  await recordNodes(deps, task, placed, cleared);
  // The streams are done; a redelivery retries only the local controllers still behind.
  if (failure !== undefined) throw failure;
  await register(deps, task, deleted);
  const { namespace, name, uid, generation } = task;
  return { namespace, name, uid, generation, deliveries };
}

/**
 * Makes up for lost events (the PingSource tick): every service is offered again — a no-op
 * where nothing changed, since deliveries are versioned — and a registered service that no
 * longer exists (or exists as a new object) gets the delete its lost delete event carried.
 * ApiServerSources send nothing for what changed while they were down, and the Broker drops an
 * event after its retries; without this such a change would never reach the edge.
 */
async function resync(deps: Deps): Promise<ResyncResult> {
  const { items } = await deps.kube.list('jointInferenceService');
  const live = new Map(items.map((o) => [`${o.metadata.namespace ?? ''}/${o.metadata.name}`, o]));
  const result: ResyncResult = { offered: 0, deleted: 0, failed: 0 };
  const attempt = async (object: KubeObject, deleted: boolean) => {
    try {
      await sync(deps, object, deleted);
      if (deleted) result.deleted += 1;
      else result.offered += 1;
    } catch (err) {
      // One service's unreachable local controller must not stop the others' resync.
      if (!(err instanceof UnavailableError)) throw err;
      result.failed += 1;
    }
  };
  for (const object of items) await attempt(object, false);
  for (const [service, text] of Object.entries(await deps.redis.hgetall(registryKey))) {
    const last = JSON.parse(text) as KubeObject;
    if (live.get(service)?.metadata.uid === last.metadata.uid) continue;
    await attempt(last, true);
  }
  return result;
}

function createDownstream(deps: Deps) {
  return {
    sync: (object: KubeObject, deleted: boolean) => sync(deps, object, deleted),
    resync: () => resync(deps),
  };
}

type Downstream = ReturnType<typeof createDownstream>;

export { createDownstream };
export type { Downstream, SyncResult, ResyncResult, NodeDelivery };
