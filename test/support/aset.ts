/**
 * Hand-made ASET fixtures several tests share: single clusters and workers with chosen figures
 * (constraints, policies), and a one-antenna topology parsed from YAML (simulator, episodes).
 */
import { parseTopology, parseVariants } from '../../shared/aset/scenario.js';
import type { Cluster, Layer, Topology, Worker } from '../../shared/aset/types.js';

const resources = { cpu: 4, memoryGiB: 8, accelerator: 0 } as const;

export function cluster(id: string, layer: Layer = 'access'): Cluster {
  return { id, layer, capacity: resources };
}

export interface WorkerSpec {
  readonly cluster: Cluster;
  readonly task?: string;
  readonly accuracy?: number;
  readonly fixedDelayMs?: number;
  readonly maxDelayMs?: number;
  readonly capacity?: number;
}

/** One replica of a variant of its own model, so each worker's figures are set independently. */
export function worker(index: number, spec: WorkerSpec): Worker {
  const capacity = spec.capacity ?? 20;
  const model = { id: `m${index}`, task: spec.task ?? 'detect', accuracy: spec.accuracy ?? 0.6 };
  return {
    index,
    model,
    cluster: spec.cluster,
    replicas: 1,
    capacity,
    variant: {
      id: `v${index}`,
      model: model.id,
      batchSize: 1,
      fixedDelayMs: spec.fixedDelayMs ?? 10,
      maxDelayMs: spec.maxDelayMs ?? 30,
      delayDeviationMs: 0,
      capacity,
      resources,
    },
  };
}

/**
 * The one-antenna topology: its access node (2 ms away, no jitter) runs `accessVariant`, and
 * optionally a cloud 20 ms further runs `v`.
 */

/** One variant, D_v(size) = 10 + 10 size ms, no deviation; capacity at its ceiling of 100/s. */
const catalogue = parseVariants(`
models:
  - { id: det, task: object-detection, accuracy: 40 }
variants:
  - id: v
    model: det
    batchSize: 1
    fixedDelayMs: 10
    maxDelayMs: 20
    delayDeviationMs: 0
    capacity: 50
    resources: { cpu: 1, memoryGiB: 1, accelerator: 0 }
  - id: fast
    model: det
    batchSize: 2
    fixedDelayMs: 9
    maxDelayMs: 10
    delayDeviationMs: 0
    capacity: 200
    resources: { cpu: 1, memoryGiB: 1, accelerator: 0 }
`);

/** One antenna; compute at its access node (2 ms away, no jitter) and optionally the cloud. */
export function tiny(
  accessVariant: string,
  withCloud = false,
  accessDeviationMs = 0,
  cloudHop = '{ delayMs: 10, deviationMs: 0 }',
): Topology {
  const cloud = withCloud
    ? 'compute: { unlimited: true, replicasPerVariant: 1, variants: [v] }'
    : '';
  return parseTopology(
    `
name: tiny
paperAntennas: 1
accessPoints: 1
layers:
  access:
    fanIn: 1
    hop: { delayMs: 2, deviationMs: ${accessDeviationMs} }
    compute:
      realClusters: 1
      serversPerCluster: 1
      perServer: { cpu: 1, memoryGiB: 1, accelerator: 0 }
      variants: [${accessVariant}]
  central-office: { fanIn: 1, hop: { delayMs: 3, deviationMs: 0 } }
  isp-dc: { fanIn: 1, hop: { delayMs: 5, deviationMs: 0 } }
  cloud:
    fanIn: 1
    hop: ${cloudHop}
    ${cloud}
`,
    catalogue,
  );
}
