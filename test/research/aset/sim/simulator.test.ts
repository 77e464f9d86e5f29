/** The ASET discrete-event simulator, on hand-made topologies and on the paper's full-edge one. */
import { describe, expect, it } from 'vitest';
import {
  BINS,
  LOAD,
  RESPONSES_PER_S,
  STREAMS,
  featuresPerWorker,
} from '../../../../shared/aset/observation.js';
import { loadScenario } from '../../../../shared/aset/scenario.js';
import { createSimulation, runStatic } from '../../../../research/aset/sim/simulator.js';
import type { SimulationOptions } from '../../../../research/aset/sim/simulator.js';
import type { Stream } from '../../../../shared/aset/types.js';
import { constantLambda } from '../../../../research/aset/sim/workload.js';
import type { StreamArrival } from '../../../../research/aset/sim/workload.js';
import { tiny } from '../../../support/aset.js';

const dataDir = new URL('../../../../data/aset/', import.meta.url);

function stream(id: number, overrides: Partial<Stream> = {}): Stream {
  return {
    id,
    app: 'app',
    task: 'object-detection',
    maxDelayMs: 30,
    minAccuracy: 30,
    rate: 10,
    size: 0.5,
    transmissionMsPerSize: 4,
    accessDelayMs: 3,
    durationS: 2,
    scheduler: 'ap-0',
    ...overrides,
  };
}

function at(atMs: number, s: Stream): StreamArrival {
  return { atMs, stream: s };
}

describe('createSimulation on a hand-made topology', () => {
  it('delivers every query of a lone stream with the latency computed by hand', () => {
    // Up: delta 3 + link 2 + transmission 4 * 0.5; processing 10 + 10 * 0.5; down: 3 + 2.
    // 27 ms end to end, which constraint (3) also expects: 2 (3 + 2) + 2 + 15.
    const latency = 3 + 2 + 2 + 15 + 3 + 2;
    const sim = createSimulation({
      topology: tiny('v'),
      seed: 1,
      arrivals: [at(0, stream(0, { maxDelayMs: latency }))],
    });
    sim.runUntil(latency - 1e-6);
    expect(sim.totals().success).toBe(0);
    sim.runUntil(latency);
    expect(sim.totals().success).toBe(1);
    sim.runUntil(1000);
    const window = sim.takeWindow();
    // Queries sent at 0, 100, ..., 900 are back by 927; the one sent at 1000 is in flight.
    expect(window).toMatchObject({ startMs: 0, endMs: 1000, success: 10, qosFailure: 0 });
    // The default policy was in force; the next window carries the one set for it.
    expect(window.policy).toBe('closest');
    sim.setPolicy('cheaper');
    sim.runUntil(1500);
    expect(sim.takeWindow().policy).toBe('cheaper');
    const sample = window.samples[0]!;
    expect(sample.timeMs).toBe(1000);
    expect(sample.success).toBe(10);
    const row = sample.features.subarray(0, featuresPerWorker);
    expect(row[STREAMS]).toBe(1);
    expect(row[RESPONSES_PER_S]).toBe(10);
    expect(row[LOAD]).toBe(5);
    // D = 27 ms falls in the [25, 40) deadline cell (1), 10 FPS in [10, 20) (1).
    expect(row[BINS + 1 * 3 + 1]).toBe(10);
    expect(Array.from(row.subarray(BINS)).reduce((a, b) => a + b, 0)).toBe(10);
    sim.runUntil(5000);
    const totals = sim.totals();
    expect(totals).toMatchObject({ success: 20, qosFailure: 0, rejected: 0, inFlight: 0 });
    expect(totals.queriesOffered).toBe(20);
    // Released when its 2 s are over, before the sample taken at that instant.
    const later = sim.takeWindow().samples;
    expect(later.map((s) => [s.timeMs, s.features[STREAMS], s.features[LOAD]])).toEqual([
      [2000, 0, 0],
      [3000, 0, 0],
      [4000, 0, 0],
      [5000, 0, 0],
    ]);
  });

  it('rejects a stream no worker can serve, counting each query when it would be sent', () => {
    const sim = createSimulation({
      topology: tiny('v'),
      seed: 1,
      arrivals: [
        at(250, stream(0, { minAccuracy: 45 })), // accuracy 40 is too low
        at(250, stream(1, { maxDelayMs: 26.9 })), // 27 ms expected: too slow
        at(250, stream(2, { rate: 200, size: 0.5 })), // 100 load > capacity 50
      ],
    });
    sim.runUntil(750);
    // Sent at 250, 350, ..., 750 for the 10 FPS streams (6 each), every 5 ms for the third.
    expect(sim.takeWindow()).toMatchObject({ rejected: 6 + 6 + 101, success: 0 });
    sim.runUntil(10_000);
    const totals = sim.totals();
    expect(totals.rejected).toBe(20 + 20 + 400);
    expect(totals.streams).toEqual({ arrived: 3, bound: 0, rejected: 3 });
    const samples = sim.takeWindow().samples;
    // Samples cover their own second, whatever the windows: (0, 1000] holds 250..950 for the
    // 10 FPS streams and 250..1000 every 5 ms for the third; (1000, 2000] the next ten and 200.
    expect(samples.slice(0, 2)).toMatchObject([
      { timeMs: 1000, rejected: 8 + 8 + 151 },
      { timeMs: 2000, rejected: 10 + 10 + 200 },
    ]);
    expect(samples.reduce((sum, s) => sum + s.rejected, 0)).toBe(totals.rejected);
  });

  it('turns overload into QoS failures, dropping late queries so the queue stays bounded', () => {
    // Batches of 2 queries of size 0.1 take 9.1 ms: 220 queries/s at most, while 20 streams
    // of 0.1 x 100 FPS reserve exactly the capacity (200 load) and send 2,000 queries/s.
    const arrivals = Array.from({ length: 20 }, (_, i) =>
      at(i, stream(i, { rate: 100, size: 0.1, maxDelayMs: 100, transmissionMsPerSize: 0 })),
    );
    const sim = createSimulation({ topology: tiny('fast'), seed: 1, arrivals });
    sim.runUntil(60_000);
    const totals = sim.totals();
    expect(totals.streams.bound).toBe(20);
    expect(totals.qosFailure).toBeGreaterThan(totals.success);
    expect(totals.success).toBeGreaterThan(0);
    expect(totals.success + totals.qosFailure + totals.rejected).toBe(totals.queriesOffered);
    expect(totals.inFlight).toBe(0);
    // Links without deviation never run over their budget: every failure here is queueing.
    expect(totals.networkLate).toBe(0);
  });

  it('blames the network for a failure only when the link draws ran over 2 (d + 2 sigma)', () => {
    // One stream at 20 FPS on an idle worker with exact processing, its D^i exactly constraint
    // (3)'s bound: 2 (3 + 2 + 2 x 1) + 2 + 15 = 31 ms. It can be late only by its link draws.
    const sim = createSimulation({
      topology: tiny('v', false, 1),
      seed: 3,
      arrivals: [at(0, stream(0, { rate: 20, durationS: 600, maxDelayMs: 31 }))],
    });
    sim.runUntil(700_000);
    const totals = sim.totals();
    expect(totals.streams.bound).toBe(1);
    // P(N(0, 2) > 4) = 0.23%: about 28 of the 12,000 queries.
    expect(totals.qosFailure).toBeGreaterThan(5);
    expect(totals.networkLate).toBe(totals.qosFailure);
  });

  it('applies a new policy to the streams arriving after it', () => {
    const sim = createSimulation({
      topology: tiny('v', true),
      seed: 1,
      policy: 'closest',
      arrivals: [
        at(0, stream(0, { maxDelayMs: 100, durationS: 10 })),
        at(1000, stream(1, { maxDelayMs: 100, durationS: 10 })),
      ],
    });
    sim.runUntil(500);
    sim.setPolicy('farthest');
    expect(sim.policy).toBe('farthest');
    sim.runUntil(2000);
    const last = sim.takeWindow().samples.at(-1)!;
    // Worker 0 is on the access node, worker 1 in the cloud: one stream each.
    expect(last.features[0 * featuresPerWorker + STREAMS]).toBe(1);
    expect(last.features[1 * featuresPerWorker + STREAMS]).toBe(1);
  });
});

describe('createSimulation on full-edge', async () => {
  const { apps, topology } = await loadScenario(dataDir, 'full-edge');
  const options: SimulationOptions = { topology, apps, lambda: constantLambda(60), seed: 42 };

  it('is deterministic for a seed, and every policy sees the same workload', () => {
    const a = runStatic(options, 'random-proportional-load', 60_000, 10_000);
    const b = runStatic(options, 'random-proportional-load', 60_000, 10_000);
    expect(b).toEqual(a);
    expect(a.windows).toHaveLength(6);
    expect(a.totals.success).toBeGreaterThan(0);
    const c = runStatic(options, 'farthest', 60_000, 10_000);
    expect(c.totals.streams.arrived).toBe(a.totals.streams.arrived);
    expect(c.totals.queriesOffered).toBe(a.totals.queriesOffered);
    expect(c.totals).not.toEqual(a.totals);
  });

  it('accounts for every query of finished streams exactly once', () => {
    // Clients for 40 s, streams at most 1800 s x 0.01 = 18 s long: all done by 60 s.
    const sim = createSimulation({
      ...options,
      lambda: [
        { fromS: 0, lambda: 60 },
        { fromS: 40, lambda: 0 },
      ],
      durationScale: 0.01,
      policy: 'least-impedance',
    });
    let windows = { success: 0, qosFailure: 0, rejected: 0 };
    let samples = { success: 0, qosFailure: 0, rejected: 0 };
    for (let t = 7_000; t <= 70_000; t += 7_000) {
      sim.runUntil(t);
      const w = sim.takeWindow();
      windows = {
        success: windows.success + w.success,
        qosFailure: windows.qosFailure + w.qosFailure,
        rejected: windows.rejected + w.rejected,
      };
      for (const s of w.samples) {
        samples = {
          success: samples.success + s.success,
          qosFailure: samples.qosFailure + s.qosFailure,
          rejected: samples.rejected + s.rejected,
        };
      }
    }
    const totals = sim.totals();
    expect(totals.inFlight).toBe(0);
    expect(totals.success + totals.qosFailure + totals.rejected).toBe(totals.queriesOffered);
    expect(windows).toEqual({
      success: totals.success,
      qosFailure: totals.qosFailure,
      rejected: totals.rejected,
    });
    expect(samples).toEqual(windows);
    const perApp = Object.values(totals.perApp);
    expect(perApp.reduce((s, o) => s + o.success + o.qosFailure + o.rejected, 0)).toBe(
      totals.queriesOffered,
    );
    // The workload is contended: every outcome occurs.
    expect(totals.qosFailure).toBeGreaterThan(0);
    expect(totals.rejected).toBeGreaterThan(0);
    // After the streams are gone, the observation shows idle workers.
    sim.runUntil(71_000);
    const idle = sim.takeWindow().samples.at(-1)!;
    for (let w = 0; w < topology.workers.length; w += 1) {
      expect(idle.features[w * featuresPerWorker + STREAMS]).toBe(0);
      expect(idle.features[w * featuresPerWorker + LOAD]).toBe(0);
    }
  });
});
