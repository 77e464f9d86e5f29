/** The seed's JointInferenceService sample, as committed under knative/samples/. */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { KubeObject } from '../../shared/k8s/index.js';

export function helmetDetectionSample(): KubeObject {
  return parse(
    readFileSync(
      new URL('../../knative/samples/helmet-detection-demo.yaml', import.meta.url),
      'utf8',
    ),
  ) as KubeObject;
}
