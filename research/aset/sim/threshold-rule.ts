/**
 * The hand-written reference of issue 20: least impedance while the edge has room, farthest once
 * it fills (the paper, III-C: least impedance "leads to the best performance when the overall load
 * is low, but may suffer from a high rejection rate once the closest and fastest model variants
 * are saturated"; farthest "preserves smaller clusters at the very edge for those apps that really
 * need them"). A learned meta-policy should beat this rule before it claims to have learned more
 * than the paper's own two sentences.
 *
 * "The edge" is the lowest layer of the topology with compute (the access nodes on full-edge, the
 * central offices on co-dc-cloud, the ISP DC on dc-cloud); its utilisation is the reserved load
 * over the capacity of its workers, read from the last sample of the window that just ended, so
 * the rule sees no more than ASET's state holds.
 */
import { LOAD, featuresPerWorker } from '../../../shared/aset/observation.js';
import { layers } from '../../../shared/aset/types.js';
import type { PolicyName, Topology } from '../../../shared/aset/types.js';
import type { SimulationWindow, WindowController } from '../../../shared/aset/window.js';

/** The workers of the lowest layer with compute. */
function edgeWorkers(topology: Topology): number[] {
  for (const layer of layers) {
    const workers = topology.workers.filter((w) => w.cluster.layer === layer);
    if (workers.length > 0 && workers.every((w) => Number.isFinite(w.capacity))) {
      return workers.map((w) => w.index);
    }
  }
  return [];
}

/** Reserved load over capacity of `workers` in the window's last sample (0 before any). */
function edgeUtilisation(
  topology: Topology,
  workers: readonly number[],
  window: SimulationWindow | undefined,
): number {
  const last = window?.samples.at(-1);
  if (last === undefined || workers.length === 0) return 0;
  let load = 0;
  let capacity = 0;
  for (const w of workers) {
    load += last.features[w * featuresPerWorker + LOAD]!;
    capacity += topology.workers[w]!.capacity;
  }
  return capacity > 0 ? load / capacity : 0;
}

/** Least impedance while the edge's utilisation is below `threshold`, farthest from there on. */
function thresholdRule(
  topology: Topology,
  threshold: number,
  below: PolicyName = 'least-impedance',
  above: PolicyName = 'farthest',
): WindowController {
  if (!(threshold >= 0)) throw new RangeError('the threshold must be a utilisation >= 0');
  const workers = edgeWorkers(topology);
  return {
    name: `${below} below ${threshold} edge utilisation, else ${above}`,
    choose: (previous) =>
      edgeUtilisation(topology, workers, previous) < threshold ? below : above,
  };
}

export { thresholdRule, edgeUtilisation, edgeWorkers };
