/** The window-control loop: per-window policies, warm-up accounting, determinism. */
import { describe, expect, it } from 'vitest';
import {
  defaultWindowMs,
  runControlled,
  staticController,
} from '../../../../research/aset/sim/episode.js';
import type { WindowController } from '../../../../shared/aset/window.js';
import { STREAMS, featuresPerWorker } from '../../../../shared/aset/observation.js';
import { loadScenario } from '../../../../shared/aset/scenario.js';
import { createSimulation, runStatic } from '../../../../research/aset/sim/simulator.js';
import type { SimulationOptions } from '../../../../research/aset/sim/simulator.js';
import type { SimulationWindow } from '../../../../shared/aset/window.js';
import type { PolicyName, Stream } from '../../../../shared/aset/types.js';
import { constantLambda } from '../../../../research/aset/sim/workload.js';
import type { StreamArrival } from '../../../../research/aset/sim/workload.js';
import { tiny } from '../../../support/aset.js';

const dataDir = new URL('../../../../data/aset/', import.meta.url);

function stream(id: number): Stream {
  return {
    id,
    app: 'app',
    task: 'object-detection',
    maxDelayMs: 100,
    minAccuracy: 30,
    rate: 10,
    size: 0.5,
    transmissionMsPerSize: 4,
    accessDelayMs: 3,
    durationS: 0.5,
    scheduler: 'ap-0',
  };
}

/** Alternates two policies and keeps what it was shown, so the test can inspect the loop. */
function alternating(a: PolicyName, b: PolicyName) {
  const seen: (SimulationWindow | undefined)[] = [];
  const controller: WindowController = {
    name: 'alternating',
    // Async on purpose: the DQN controller is, and the loop must await it.
    choose: (previous) => {
      seen.push(previous);
      return Promise.resolve(seen.length % 2 === 1 ? a : b);
    },
  };
  return { controller, seen };
}

describe('runControlled', () => {
  // One short stream in the middle of each 1 s window.
  const arrivals: StreamArrival[] = [0, 1, 2, 3].map((k) => ({
    atMs: k * 1000 + 200,
    stream: stream(k),
  }));
  const options: SimulationOptions = { topology: tiny('v', true), seed: 1, arrivals };

  it("binds each window's streams with the policy chosen for that window", async () => {
    const { controller, seen } = alternating('closest', 'farthest');
    // Samples every 500 ms, so each window shows its stream mid-life and again once it is over.
    const run = await runControlled({ ...options, sampleEveryMs: 500 }, controller, {
      durationMs: 4000,
      windowMs: 1000,
    });
    expect(run.windows.map((w) => w.policy)).toEqual([
      'closest',
      'farthest',
      'closest',
      'farthest',
    ]);
    expect(run.windows.map((w) => [w.startMs, w.endMs])).toEqual([
      [0, 1000],
      [1000, 2000],
      [2000, 3000],
      [3000, 4000],
    ]);
    // The controller saw nothing before the first window, then each window as it ended.
    expect(seen[0]).toBeUndefined();
    expect(seen.slice(1).map((w) => w?.endMs)).toEqual([1000, 2000, 3000]);
    // Streams per worker (0: access node, 1: cloud) at 500 and 1000 ms into each window.
    const streams = (window: SimulationWindow | undefined) =>
      window!.samples.map((s) => [0, 1].map((w) => s.features[w * featuresPerWorker + STREAMS]));
    expect(seen.slice(1).map(streams)).toEqual([
      [
        [1, 0],
        [0, 0],
      ],
      [
        [0, 1],
        [0, 0],
      ],
      [
        [1, 0],
        [0, 0],
      ],
    ]);
    // Every query was served in time: 5 per stream (sent at 0, 100, ..., 400 ms of its life).
    expect(run.counted).toEqual({ success: 20, qosFailure: 0, rejected: 0 });
  });

  it('matches a hand-driven simulation with the same policy sequence', async () => {
    const { controller } = alternating('farthest', 'closest');
    const run = await runControlled(options, controller, { durationMs: 3500, windowMs: 1000 });
    const sim = createSimulation(options);
    const policies: PolicyName[] = ['farthest', 'closest', 'farthest', 'closest'];
    const expected = [1000, 2000, 3000, 3500].map((end, i) => {
      sim.setPolicy(policies[i]!);
      sim.runUntil(end);
      const { samples: _samples, ...outcomes } = sim.takeWindow();
      return { ...outcomes, policy: policies[i] };
    });
    // The last window is cut at the run's end.
    expect(run.windows).toEqual(expected);
  });

  it('counts only the windows starting at or after the warm-up', async () => {
    const { controller } = alternating('closest', 'farthest');
    const full = await runControlled(options, controller, { durationMs: 4000, windowMs: 1000 });
    const again = alternating('closest', 'farthest');
    // 1500 ms: the window starting at 1000 began inside the warm-up, so it is left out too.
    const warm = await runControlled(options, again.controller, {
      durationMs: 4000,
      windowMs: 1000,
      warmupMs: 1500,
    });
    expect(warm.windows).toEqual(full.windows);
    const late = full.windows.filter((w) => w.startMs >= 2000);
    expect(warm.counted).toEqual({
      success: late.reduce((n, w) => n + w.success, 0),
      qosFailure: late.reduce((n, w) => n + w.qosFailure, 0),
      rejected: late.reduce((n, w) => n + w.rejected, 0),
    });
    expect(warm.counted.success).toBeLessThan(full.counted.success);
    expect(warm.policyShare).toMatchObject({ closest: 0.5, farthest: 0.5, cheaper: 0 });
  });

  it('rejects nonsense run lengths instead of running zero windows', async () => {
    const controller = staticController('closest');
    await expect(runControlled(options, controller, { durationMs: 0 })).rejects.toThrow(RangeError);
    await expect(
      runControlled(options, controller, { durationMs: 1000, windowMs: -1 }),
    ).rejects.toThrow(RangeError);
    expect(() => staticController('nope' as PolicyName)).toThrow(RangeError);
  });
});

describe('runControlled on full-edge', async () => {
  const { apps, topology } = await loadScenario(dataDir, 'full-edge');
  const options: SimulationOptions = { topology, apps, lambda: constantLambda(60), seed: 7 };

  it('gives a static controller the numbers of runStatic, deterministically', async () => {
    const spec = { durationMs: 60_000, windowMs: 10_000, warmupMs: 20_000 };
    const a = await runControlled(options, staticController('cheaper'), spec);
    const b = await runControlled(options, staticController('cheaper'), spec);
    expect(b).toEqual(a);
    const reference = runStatic(options, 'cheaper', 60_000, 10_000);
    expect(a.windows.map(({ policy: _p, ...w }) => w)).toEqual(reference.windows);
    expect(a.policyShare.cheaper).toBe(1);
    expect(a.counted.success).toBe(reference.windows.slice(2).reduce((n, w) => n + w.success, 0));
    expect(defaultWindowMs).toBe(25_000);
  });
});
