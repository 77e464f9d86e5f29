/** The load-threshold reference: least impedance while the edge has room, farthest after. */
import { describe, expect, it } from 'vitest';
import { LOAD, featuresPerWorker } from '../../../../shared/aset/observation.js';
import { loadScenario } from '../../../../shared/aset/scenario.js';
import { createSimulation } from '../../../../research/aset/sim/simulator.js';
import {
  edgeUtilisation,
  edgeWorkers,
  thresholdRule,
} from '../../../../research/aset/sim/threshold-rule.js';
import { constantLambda } from '../../../../research/aset/sim/workload.js';
import type { SimulationWindow } from '../../../../shared/aset/window.js';
import { tiny } from '../../../support/aset.js';

const dataDir = new URL('../../../../data/aset/', import.meta.url);

/** A window whose last sample reserves `load` on worker 0 (the access worker of `tiny`). */
function windowWith(load: number, workers: number): SimulationWindow {
  const features = new Float32Array(workers * featuresPerWorker);
  features[0 * featuresPerWorker + LOAD] = load;
  return {
    startMs: 0,
    endMs: 25_000,
    policy: 'farthest',
    success: 0,
    qosFailure: 0,
    rejected: 0,
    samples: [{ timeMs: 25_000, features, success: 0, qosFailure: 0, rejected: 0 }],
  };
}

describe('thresholdRule', () => {
  const topology = tiny('v', true);
  const access = topology.workers.find((w) => w.cluster.layer === 'access')!;

  it('plays least impedance below the threshold (and at the start), farthest at or above it', () => {
    const rule = thresholdRule(topology, 0.5);
    const n = topology.workers.length;
    expect(rule.choose(undefined)).toBe('least-impedance');
    expect(rule.choose(windowWith(0.3 * access.capacity, n))).toBe('least-impedance');
    expect(rule.choose(windowWith(0.5 * access.capacity, n))).toBe('farthest');
    expect(rule.choose(windowWith(0.9 * access.capacity, n))).toBe('farthest');
    expect(() => thresholdRule(topology, -1)).toThrow(RangeError);
  });

  it('reads the lowest layer with compute: access nodes on full-edge, the ISP DC on dc-cloud', async () => {
    expect(edgeWorkers(topology)).toEqual([access.index]);
    const full = (await loadScenario(dataDir, 'full-edge')).topology;
    const dc = (await loadScenario(dataDir, 'dc-cloud')).topology;
    expect(new Set(edgeWorkers(full).map((w) => full.workers[w]!.cluster.layer))).toEqual(
      new Set(['access']),
    );
    expect(new Set(edgeWorkers(dc).map((w) => dc.workers[w]!.cluster.layer))).toEqual(
      new Set(['isp-dc']),
    );
  });

  it("measures a real run's edge filling up from empty", async () => {
    const { topology: full, apps } = await loadScenario(dataDir, 'full-edge');
    const sim = createSimulation({ topology: full, apps, lambda: constantLambda(60), seed: 1 });
    const workers = edgeWorkers(full);
    sim.setPolicy('least-impedance');
    sim.runUntil(25_000);
    const early = edgeUtilisation(full, workers, sim.takeWindow());
    sim.runUntil(150_000);
    const later = edgeUtilisation(full, workers, sim.takeWindow());
    expect(early).toBeGreaterThan(0);
    expect(later).toBeGreaterThan(early);
    expect(later).toBeLessThanOrEqual(1 + 1e-9);
  });
});
