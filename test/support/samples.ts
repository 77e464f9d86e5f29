/** The seed's JointInferenceService sample, as committed under knative/samples/. */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { KubeObject } from '../../shared/k8s/index.js';
import type { Placement, Task } from '../../shared/sync/index.js';

export function helmetDetectionSample(): KubeObject {
  return parse(
    readFileSync(
      new URL('../../knative/samples/helmet-detection-demo.yaml', import.meta.url),
      'utf8',
    ),
  ) as KubeObject;
}

/** The sample as downstream-sync's task for `generation`, its hard-example miner set to `hem`. */
export function helmetDetectionTask(
  generation: number,
  hem: unknown,
): Omit<Task, 'operation'> & { placement: Placement } {
  const sample = helmetDetectionSample();
  return {
    namespace: 'default',
    name: 'helmet-detection-demo',
    uid: 'u1',
    generation,
    resource: {
      ...sample,
      spec: {
        ...(sample['spec'] as object),
        edgeWorker: {
          ...(sample['spec'] as { edgeWorker: object }).edgeWorker,
          hardExampleAlgorithm: hem,
        },
      },
    },
    created: sample.metadata.creationTimestamp ?? '',
    placement: 'present',
  };
}
