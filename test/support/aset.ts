/**
 * The hand-made ASET topology several tests share: one antenna whose access node (2 ms away, no
 * jitter) runs `accessVariant`, and optionally a cloud 20 ms further running `v`.
 */
import { parseTopology, parseVariants } from '../../shared/aset/scenario.js';
import type { Topology } from '../../shared/aset/types.js';

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
export function tiny(accessVariant: string, withCloud = false): Topology {
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
    hop: { delayMs: 2, deviationMs: 0 }
    compute:
      realClusters: 1
      serversPerCluster: 1
      perServer: { cpu: 1, memoryGiB: 1, accelerator: 0 }
      variants: [${accessVariant}]
  central-office: { fanIn: 1, hop: { delayMs: 3, deviationMs: 0 } }
  isp-dc: { fanIn: 1, hop: { delayMs: 5, deviationMs: 0 } }
  cloud:
    fanIn: 1
    hop: { delayMs: 10, deviationMs: 0 }
    ${cloud}
`,
    catalogue,
  );
}
