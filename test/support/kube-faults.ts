/** A Kube that fails some of its writes, as a busy API server does. */
import { ConflictError } from '../../shared/errors/index.js';
import type { Kube } from '../../shared/k8s/index.js';

/** Fails every `every`-th status write with a 409 before it reaches the API server. */
export function conflicting(kube: Kube, every: number): Kube & { forced: () => number } {
  let calls = 0;
  let forced = 0;
  return {
    ...kube,
    patchStatus(ref, patch) {
      calls += 1;
      if (calls % every === 0) {
        forced += 1;
        return Promise.reject(new ConflictError('forced conflict'));
      }
      return kube.patchStatus(ref, patch);
    },
    forced: () => forced,
  };
}
