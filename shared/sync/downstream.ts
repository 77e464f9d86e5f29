/**
 * downstream-sync: an ApiServerSource event about a JointInferenceService becomes a task for
 * each of its edge nodes. The stream side is idempotent (streams.ts); the local-controller side
 * is retried by redelivery until the node acknowledged the version. Nodes that stop matching a
 * nodeSelector get a delete.
 */
import { placementNodes } from '../controller/index.js';
import { NotFoundError, UnavailableError } from '../errors/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import type { RedisClient } from '../redis/index.js';
import { hashTag, key } from '../redis/index.js';
import type { LocalControllerClient } from './local-controller.js';
import { localControllerUrl } from './local-controller.js';
import type { TaskStreams } from './streams.js';
import { taskOf } from './task.js';
import type { Operation } from './task.js';

interface NodeDelivery {
  node: string;
  operation: string;
  stream: 'appended' | 'unchanged';
  localController: 'delivered' | 'up-to-date' | 'not-configured' | 'node-missing';
}

interface SyncResult {
  namespace: string;
  name: string;
  uid: string;
  generation: number;
  deliveries: NodeDelivery[];
}

function createDownstream(deps: {
  kube: Kube;
  redis: RedisClient;
  streams: TaskStreams;
  localControllers: LocalControllerClient;
}) {
  const { kube, redis, streams, localControllers } = deps;
  const nodesKey = (namespace: string, name: string) =>
    key('tasks', hashTag(`${namespace}/${name}`), 'nodes');

  async function getNode(name: string): Promise<KubeObject | undefined> {
    try {
      return await kube.get({ kind: 'node', name });
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  return {
    async sync(object: KubeObject, deleted: boolean): Promise<SyncResult> {
      const task = taskOf(object, deleted);
      const spec = object['spec'] as
        { edgeWorker?: { nodeName?: string; nodeSelector?: Record<string, string> } } | undefined;
      const edge = spec?.edgeWorker ?? {};
      const selecting = edge.nodeName === undefined && edge.nodeSelector !== undefined;
      const allNodes = selecting ? (await kube.list('node')).items : [];
      const wanted = new Set(placementNodes(edge, allNodes) ?? []);
      // Nodes sent this service before but no longer selected get a delete.
      const previous = await redis.smembers(nodesKey(task.namespace, task.name));
      const targets = new Map<string, boolean>();
      for (const node of wanted) targets.set(node, deleted);
      for (const node of previous) if (!wanted.has(node)) targets.set(node, true);
      const deliveries: NodeDelivery[] = [];
      let failure: UnavailableError | undefined;
      for (const [node, remove] of targets) {
        const offer = await streams.offer(node, { ...task, deleted: remove });
        const delivery: NodeDelivery = {
          node,
          operation: offer.operation,
          stream: offer.appended ? 'appended' : 'unchanged',
          localController: 'up-to-date',
        };
        deliveries.push(delivery);
        // The stored version may belong to a newer generation or object: its own event delivers it.
        const [storedOperation, storedUid, storedGeneration] = offer.version.split('|');
        if (
          offer.localControllerUpToDate ||
          storedUid !== task.uid ||
          Number(storedGeneration) !== task.generation
        )
          continue;
        const nodeObject = await getNode(node);
        const base = nodeObject === undefined ? undefined : localControllerUrl(nodeObject);
        if (base === undefined) {
          delivery.localController = nodeObject === undefined ? 'node-missing' : 'not-configured';
          continue;
        }
        const operation = storedOperation as Operation;
        try {
          await localControllers.deliver(base, { ...task, operation }, node);
          await streams.confirmLocalController(
            node,
            `${task.namespace}/${task.name}`,
            offer.version,
          );
          delivery.localController = 'delivered';
        } catch (err) {
          if (!(err instanceof UnavailableError)) throw err;
          failure ??= err;
        }
      }
      const key = nodesKey(task.namespace, task.name);
      const gone = [...targets].filter(([, remove]) => remove).map(([node]) => node);
      if (wanted.size > 0 && !deleted) await redis.sadd(key, ...wanted);
      if (gone.length > 0) await redis.srem(key, ...gone);
      // The streams are done; a redelivery retries only the local controllers still behind.
      if (failure !== undefined) throw failure;
      return {
        namespace: task.namespace,
        name: task.name,
        uid: task.uid,
        generation: task.generation,
        deliveries,
      };
    },
  };
}

type Downstream = ReturnType<typeof createDownstream>;

export { createDownstream };
export type { Downstream, SyncResult, NodeDelivery };
