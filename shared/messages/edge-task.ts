/**
 * The task record downstream-sync keeps for an edge node, and where it keeps it: seed 000's
 * "body same as the task CRD" with the version (uid, generation) that orders deliveries. One
 * contract, both ends: shared/sync writes each node's keys (`nodeKeys`) and every record with
 * `EdgeTask` (the node's stream entries and its `current` hash: each service's latest task), and
 * the edge worker (shared/inference/task-reload.ts) parses its `current` entry with `edgeTask`
 * and reads its miner from the resource's spec with `edgeMiningSpec`.
 */
import { z } from 'zod';
import { jointInferenceServiceSpec } from '../crds/index.js';
import { hashTag, key } from '../redis/index.js';

/** A node's task keys; all in the node's hash slot, as one script touches them together. */
function nodeKeys(node: string) {
  const tag = hashTag(node);
  return {
    /** The node's deliveries, read through a consumer group. */
    stream: key('tasks', tag, 'stream'),
    /** service -> stored version ("state|uid|generation|created"). */
    versions: key('tasks', tag, 'versions'),
    /** service -> its latest task (an `EdgeTask`'s JSON), for a node that starts from nothing. */
    current: key('tasks', tag, 'current'),
    localController: key('tasks', tag, 'local-controller'),
    localControllerEpoch: key('tasks', tag, 'local-controller-epoch'),
    dead: key('tasks', tag, 'dead'),
  };
}

/**
 * The resource as the API server had it (status dropped: it is not the edge's business). Loose:
 * the edge reads the part it uses with its own schema (`edgeMiningSpec`).
 */
const taskResource = z.looseObject({ metadata: z.looseObject({ name: z.string() }) });

const edgeTask = z.object({
  namespace: z.string(),
  name: z.string(),
  uid: z.string(),
  generation: z.number().int().min(0),
  resource: taskResource,
});

/** What sync writes (a `KubeObject` is a resource). */
type EdgeTask = z.input<typeof edgeTask>;

const edgeWorker = jointInferenceServiceSpec.shape.edgeWorker.shape;

/**
 * What the edge worker reloads from a task: its miner, in the CRD's own terms (the resource's
 * `spec.edgeWorker.hardExampleAlgorithm`, and its `workerSpec` for Sedna's string parameters).
 * The rest of the spec is not its business, so it is not checked here.
 */
const edgeMiningSpec = z.looseObject({
  edgeWorker: z
    .looseObject({
      hardExampleAlgorithm: edgeWorker.hardExampleAlgorithm.optional(),
      workerSpec: edgeWorker.workerSpec,
    })
    .optional(),
});

type EdgeMiningSpec = z.output<typeof edgeMiningSpec>;

export { nodeKeys, edgeTask, edgeMiningSpec };
export type { EdgeTask, EdgeMiningSpec };
