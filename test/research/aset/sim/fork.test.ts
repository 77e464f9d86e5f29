/**
 * Simulation.fork: a copy of the whole state, running bit-identically to the original under the
 * same calls and independently of it (what the hindsight oracle tries its candidates on).
 */
import { describe, expect, it } from 'vitest';
import { loadScenario } from '../../../../shared/aset/scenario.js';
import { createSimulation } from '../../../../research/aset/sim/simulator.js';
import type { Simulation, SimulationOptions } from '../../../../research/aset/sim/simulator.js';
import type { PolicyName, Stream } from '../../../../shared/aset/types.js';
import type { SimulationWindow } from '../../../../shared/aset/window.js';
import { constantLambda } from '../../../../research/aset/sim/workload.js';
import type { StreamArrival } from '../../../../research/aset/sim/workload.js';
import { tiny } from '../../../support/aset.js';

const dataDir = new URL('../../../../data/aset/', import.meta.url);

/** A policy to set and the time to run to; `take` takes the window there. */
interface Step {
  readonly policy: PolicyName;
  readonly untilMs: number;
  readonly take?: boolean;
}

/** Drives `sim` through `steps`, returning the windows taken (samples included). */
function drive(sim: Simulation, steps: readonly Step[]): SimulationWindow[] {
  const windows: SimulationWindow[] = [];
  for (const { policy, untilMs, take = true } of steps) {
    sim.setPolicy(policy);
    sim.runUntil(untilMs);
    if (take) windows.push(sim.takeWindow());
  }
  return windows;
}

/** Everything observable of a run: its windows (with every sample) and its totals. */
function record(sim: Simulation, steps: readonly Step[]) {
  const windows = drive(sim, steps);
  return { windows, totals: sim.totals(), now: sim.now(), policy: sim.policy };
}

/** Windows of `everyMs` from `fromMs` to `toMs`, cycling through `policies`. */
function steps(policies: readonly PolicyName[], fromMs: number, toMs: number, everyMs: number) {
  const out: Step[] = [];
  for (let t = fromMs + everyMs, k = 0; t <= toMs; t += everyMs, k += 1) {
    out.push({ policy: policies[k % policies.length]!, untilMs: t });
  }
  return out;
}

describe('Simulation.fork on full-edge under heavy load', async () => {
  const { apps, topology } = await loadScenario(dataDir, 'full-edge');
  const options: SimulationOptions = { topology, apps, lambda: constantLambda(100), seed: 11 };
  // The random policies draw from the policy stream; the others exercise the rest.
  const prefix: Step[] = [
    ...steps(
      ['random-proportional-load', 'closest', 'random-proportional-latency'],
      0,
      15_000,
      5_000,
    ),
    // Forked mid-window: the window's counts and samples so far must be carried over.
    { policy: 'farthest', untilMs: 17_500, take: false },
  ];
  const suffix = steps(
    ['least-impedance', 'random-proportional-load', 'cheaper', 'load-balancing'],
    17_500,
    42_500,
    5_000,
  );
  const other = steps(['random-proportional-latency', 'farthest'], 17_500, 60_000, 2_500);

  it('stands where the original stands, and runs in lockstep with it', () => {
    const original = createSimulation(options);
    drive(original, prefix);
    const totals = original.totals();
    // Queries in flight when the fork is taken (the hand-made test below forks mid-overload).
    expect(totals.inFlight).toBeGreaterThan(0);
    const fork = original.fork();
    expect(fork.now()).toBe(17_500);
    expect(fork.policy).toBe('farthest');
    expect(fork.totals()).toEqual(totals);
    // Alternating calls, so any state shared between the two would show.
    const a: SimulationWindow[] = [];
    const b: SimulationWindow[] = [];
    for (const step of suffix) {
      a.push(...drive(original, [step]));
      b.push(...drive(fork, [step]));
      expect(b.at(-1)).toEqual(a.at(-1));
    }
    expect(b).toEqual(a);
    expect(a[0]!.startMs).toBe(15_000);
    // Samples at 16 and 17 s were taken before the fork, 18 to 22 s after it.
    expect(b[0]!.samples.map((s) => s.timeMs)).toEqual(
      [16, 17, 18, 19, 20, 21, 22].map((s) => s * 1000),
    );
    expect(a.reduce((n, w) => n + w.success + w.qosFailure + w.rejected, 0)).toBeGreaterThan(0);
    expect(fork.totals()).toEqual(original.totals());
  });

  it('is independent of the original: both match runs that were never forked', () => {
    const original = createSimulation(options);
    drive(original, prefix);
    const fork = original.fork();
    // The fork runs ahead on other policies first; then the original runs its own course.
    const forkRun = record(fork, other);
    const originalRun = record(original, suffix);
    const never = createSimulation(options);
    drive(never, prefix);
    expect(originalRun).toEqual(record(never, suffix));
    const replayed = createSimulation(options);
    drive(replayed, prefix);
    expect(forkRun).toEqual(record(replayed, other));
    // The two courses did part ways, so the equalities above are not trivial.
    expect(forkRun.windows[0]).not.toEqual(originalRun.windows[0]);
  });

  it('forks of forks and forks at time 0 are exact too', () => {
    const root = createSimulation(options);
    const atZero = root.fork();
    drive(root, prefix.slice(0, 2));
    const child = root.fork();
    drive(child, prefix.slice(2));
    const grandchild = child.fork();
    expect(record(grandchild, suffix)).toEqual(record(child, suffix));
    const fresh = createSimulation(options);
    expect(record(atZero, [...prefix, ...suffix])).toEqual(record(fresh, [...prefix, ...suffix]));
  });
});

describe('Simulation.fork mid-overload on a hand-made topology', () => {
  const stream = (id: number, overrides: Partial<Stream>): Stream => ({
    id,
    app: `app-${id % 3}`,
    task: 'object-detection',
    maxDelayMs: 100,
    minAccuracy: 30,
    rate: 100,
    size: 0.1,
    transmissionMsPerSize: 0,
    accessDelayMs: 3,
    durationS: 20,
    scheduler: 'ap-0',
    ...overrides,
  });
  // 20 streams fill the access worker's capacity and send 2,000 queries/s to a worker that can
  // serve about 220: its queue stays long and drops late queries. Then a stream no worker can
  // take (load 100, the cloud's capacity is 50): rejected, its queries counted as they are sent.
  const arrivals: StreamArrival[] = [
    ...Array.from({ length: 20 }, (_, i) => ({ atMs: i, stream: stream(i, {}) })),
    { atMs: 30, stream: stream(20, { size: 1, durationS: 30 }) },
    // Light streams every second, before and after the fork, that only the cloud can take now:
    // their queries cross the spiky hop.
    ...Array.from({ length: 20 }, (_, k) => ({
      atMs: 1000 * (k + 1),
      stream: stream(21 + k, { rate: 10, durationS: 10 }),
    })),
  ];
  // Network jitter on the access hop and a spiky cloud hop: every random stream draws.
  const options: SimulationOptions = {
    topology: tiny(
      'fast',
      true,
      1,
      '{ delayMs: 10, deviationMs: 3, spikes: { probability: 0.2, shape: 1.5, scaleMs: 5 } }',
    ),
    seed: 7,
    arrivals,
    policy: 'closest',
    sampleEveryMs: 700,
  };

  it('copies the queue, the queries in flight and the rejected stream still being counted', () => {
    const original = createSimulation(options);
    original.runUntil(5_050);
    const before = original.totals();
    expect(before.streams).toEqual({ arrived: 26, bound: 25, rejected: 1 });
    // Far more in flight than one server and the links hold: the queue is long.
    expect(before.inFlight).toBeGreaterThan(100);
    expect(before.qosFailure).toBeGreaterThan(0);
    // The rejected stream has sent about 500 of its 3,000 queries: most are still to count.
    expect(before.rejected).toBeGreaterThan(400);
    expect(before.rejected).toBeLessThan(3_000);
    const fork = original.fork();
    const course = steps(['closest', 'farthest', 'random-proportional-load'], 5_050, 40_050, 3_500);
    const forkRun = record(fork, course);
    const never = createSimulation(options);
    never.runUntil(5_050);
    const neverRun = record(never, course);
    expect(forkRun).toEqual(neverRun);
    expect(record(original, course)).toEqual(neverRun);
    // Everything was resolved by the end: the carried-over queue and rejections all counted.
    expect(neverRun.totals.inFlight).toBe(0);
    expect(neverRun.totals.rejected).toBe(3_000);
    expect(neverRun.totals.success + neverRun.totals.qosFailure + neverRun.totals.rejected).toBe(
      neverRun.totals.queriesOffered,
    );
  });
});
