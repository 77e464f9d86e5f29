/**
 * Constraints (1)-(4) of the ASET paper's section III-B: each one exactly at its bound (feasible)
 * and just past it (reported by name), decimal profiles whose binary sum rounds past an on-paper
 * bound, several failures reported together in the paper's order, and `feasibleCandidates`
 * deciding exactly as `violations` on random topologies.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  candidateFor,
  feasibleCandidates,
  networkMs,
  processingDelayMs,
  violations,
} from '../../../shared/aset/constraints.js';
import type { Scheduler, Stream, Worker } from '../../../shared/aset/types.js';
import { cluster, worker } from '../../support/aset.js';

/** `links` maps a cluster id to [d_n^s, sigma_n^s]. */
function scheduler(links: Record<string, readonly [number, number]>): Scheduler {
  return {
    id: 's0',
    cluster: 'edge',
    links: Object.fromEntries(
      Object.entries(links).map(([id, [delayMs, deviationMs]]) => [id, { delayMs, deviationMs }]),
    ),
  };
}

function stream(overrides: Partial<Stream> = {}): Stream {
  return {
    id: 1,
    app: 'ar',
    task: 'detect',
    maxDelayMs: 42,
    minAccuracy: 0.5,
    rate: 10,
    size: 0.5,
    transmissionMsPerSize: 4,
    accessDelayMs: 3,
    durationS: 60,
    scheduler: 's0',
    ...overrides,
  };
}

const edge = cluster('edge');
const sched = scheduler({ edge: [5, 1] });
// Base case, every figure exact in binary:
//   D_v(0.5) = 10 + (30 - 10) * 0.5 = 20
//   (3): 2 * (3 + 5 + 2 * 1) + 4 * 0.5 + 20 = 20 + 2 + 20 = 42 = D^i
//   (2): 15 + 0.5 * 10 = 20 = C_v
//   (4): A_m = 0.6 against A^i = 0.5
const base = worker(0, { cluster: edge });
const baseLoad = 15;

describe('processingDelayMs and networkMs', () => {
  it('interpolates D_v linearly from the fixed part at size 0 to the profile at size 1', () => {
    const { variant } = base;
    expect(processingDelayMs(variant, 0)).toBe(10);
    expect(processingDelayMs(variant, 1)).toBe(30);
    expect(processingDelayMs(variant, 0.25)).toBe(15);
  });

  it('budgets a link at its mean plus two deviations', () => {
    expect(networkMs({ delayMs: 5, deviationMs: 1 })).toBe(7);
  });
});

describe('candidateFor', () => {
  it('carries the load, d + 2 sigma and 2 (d + 2 sigma) + D_v(zeta)', () => {
    // networkMs = 5 + 2 * 1 = 7; expectedMs = 2 * 7 + 20 = 34
    expect(candidateFor(stream(), sched, base, 3)).toEqual({
      worker: base,
      load: 3,
      networkMs: 7,
      expectedMs: 34,
    });
  });

  it('throws when the scheduler has no link to the worker cluster', () => {
    const orphan = worker(1, { cluster: cluster('elsewhere') });
    expect(() => candidateFor(stream(), sched, orphan, 0)).toThrow(/no link to cluster elsewhere/);
    expect(() => violations(stream(), sched, orphan, 0)).toThrow(/no link/);
    expect(() => feasibleCandidates(stream(), sched, [base, orphan], () => 0)).toThrow(/no link/);
  });
});

describe('violations: each constraint at its bound', () => {
  it('base case sits exactly on the delay and capacity bounds and is feasible', () => {
    expect(violations(stream(), sched, base, baseLoad)).toEqual([]);
  });

  it('(1) task: the same task is feasible, another task is reported', () => {
    expect(violations(stream({ task: 'detect' }), sched, base, 0)).toEqual([]);
    expect(violations(stream({ task: 'classify' }), sched, base, 0)).toEqual(['task']);
  });

  it('(2) capacity: load + zeta rho = C_v is feasible, 1e-6 more is reported', () => {
    // 15 + 0.5 * 10 = 20 = C_v
    expect(violations(stream(), sched, base, 15)).toEqual([]);
    expect(violations(stream(), sched, base, 15 + 1e-6)).toEqual(['capacity']);
    // Through the stream's own load too: 15 + 0.5 * (10 + 2e-6) = 20 + 1e-6
    expect(violations(stream({ rate: 10 + 2e-6 }), sched, base, 15)).toEqual(['capacity']);
  });

  it('(3) delay: end-to-end = D^i is feasible, a bound 1e-6 ms lower is reported', () => {
    // 2 * (3 + 5 + 2 * 1) + 4 * 0.5 + 20 = 42
    expect(violations(stream({ maxDelayMs: 42 }), sched, base, 0)).toEqual([]);
    expect(violations(stream({ maxDelayMs: 42 - 1e-6 }), sched, base, 0)).toEqual(['delay']);
    // Each term counts: 1e-6 ms more access delay is 2e-6 ms more round trip.
    expect(violations(stream({ accessDelayMs: 3 + 1e-6 }), sched, base, 0)).toEqual(['delay']);
    // and the transmission term: (4 + 2e-6) * 0.5 = 2 + 1e-6 ms
    expect(violations(stream({ transmissionMsPerSize: 4 + 2e-6 }), sched, base, 0)).toEqual([
      'delay',
    ]);
  });

  it('(4) accuracy: A_m = A^i is feasible, A^i 1e-6 higher is reported', () => {
    expect(violations(stream({ minAccuracy: 0.6 }), sched, base, 0)).toEqual([]);
    expect(violations(stream({ minAccuracy: 0.6 + 1e-6 }), sched, base, 0)).toEqual(['accuracy']);
  });

  it('treats figures equal on paper as equal when the binary arithmetic rounds past the bound', () => {
    // (2): 0.1 + 0.2 * 1 is 0.30000000000000004 in binary, against C_v = 0.3.
    const small = worker(1, { cluster: edge, capacity: 0.3 });
    const light = stream({ size: 0.2, rate: 1, maxDelayMs: 1000 });
    expect(0.1 + 0.2 * 1 > 0.3).toBe(true);
    expect(violations(light, sched, small, 0.1)).toEqual([]);
    // (3): 2 * (0.1 + 0.1 + 2 * 0.1) + 0.3 * 0.1 + (1.1 + (3.3 - 1.1) * 0.1)
    //      = 0.8 + 0.03 + 1.32 = 2.15 on paper, 2.1500000000000004 in binary.
    const fast = worker(2, { cluster: cluster('near'), fixedDelayMs: 1.1, maxDelayMs: 3.3 });
    const near = scheduler({ near: [0.1, 0.1] });
    const tight = stream({
      accessDelayMs: 0.1,
      transmissionMsPerSize: 0.3,
      size: 0.1,
      rate: 1,
      maxDelayMs: 2.15,
    });
    expect(2 * (0.1 + 0.1 + 2 * 0.1) + 0.3 * 0.1 + (1.1 + (3.3 - 1.1) * 0.1) > 2.15).toBe(true);
    expect(violations(tight, near, fast, 0)).toEqual([]);
  });

  it('accepts any finite load on an unlimited worker', () => {
    const cloud = worker(3, { cluster: edge, capacity: Infinity });
    expect(violations(stream(), sched, cloud, 1e12)).toEqual([]);
  });
});

describe('violations: several at once', () => {
  it('reports every failing constraint in the order (1)-(4)', () => {
    const bad = stream({ task: 'classify', maxDelayMs: 41, minAccuracy: 0.9 });
    expect(violations(bad, sched, base, 16)).toEqual(['task', 'capacity', 'delay', 'accuracy']);
  });

  it('reports only the failing ones, still in order', () => {
    expect(violations(stream({ minAccuracy: 0.9 }), sched, base, 16)).toEqual([
      'capacity',
      'accuracy',
    ]);
    expect(violations(stream({ task: 'x', maxDelayMs: 1 }), sched, base, 0)).toEqual([
      'task',
      'delay',
    ]);
  });
});

describe('feasibleCandidates', () => {
  // Links: edge 5 + 2 * 1 = 7, office 10 + 2 * 2 = 14, cloud 30 + 2 * 5 = 40.
  const office = cluster('office', 'central-office');
  const cloud = cluster('cloud', 'cloud');
  const links = scheduler({ edge: [5, 1], office: [10, 2], cloud: [30, 5] });
  // Stream: size 0.5, rate 10 (load 5), b * zeta = 2, round-trip access 2 * 3 = 6, D^i = 60.
  const s = stream({ maxDelayMs: 60 });
  const workers = [
    // 6 + 2 * 7 + 2 + 20 = 42 <= 60; load 0 + 5 <= 20: feasible, expected 2 * 7 + 20 = 34
    worker(0, { cluster: edge }),
    // wrong task
    worker(1, { cluster: edge, task: 'classify' }),
    // 6 + 2 * 14 + 2 + 20 = 56 <= 60; load 15 + 5 = 20 = C_v: feasible, expected 28 + 20 = 48
    worker(2, { cluster: office }),
    // 6 + 2 * 40 + 2 + D_v > 60: too far
    worker(3, { cluster: cloud, fixedDelayMs: 1, maxDelayMs: 1 }),
    // load 16 + 5 = 21 > 20
    worker(4, { cluster: office }),
    // accuracy 0.4 < 0.5
    worker(5, { cluster: edge, accuracy: 0.4 }),
    // 6 + 2 * 7 + 2 + D_v(0.5) = 22 + (10 + 58 * 0.5 = 39) = 61 > 60
    worker(6, { cluster: edge, maxDelayMs: 68 }),
    // D_v(0.5) = 10 + 56 * 0.5 = 38; 6 + 14 + 2 + 38 = 60 = D^i; load 7 + 5 <= 20: feasible,
    // expected 2 * 7 + 38 = 52
    worker(7, { cluster: edge, maxDelayMs: 66 }),
  ];
  const loads = [0, 0, 15, 0, 16, 0, 0, 7];
  const loadOf = (w: Worker): number => loads[w.index] ?? 0;

  it('keeps exactly the feasible workers, in worker order, with their figures', () => {
    const feasible = feasibleCandidates(s, links, workers, loadOf);
    expect(feasible.map((c) => c.worker.index)).toEqual([0, 2, 7]);
    expect(feasible.map((c) => [c.load, c.networkMs, c.expectedMs])).toEqual([
      [0, 7, 34],
      [15, 14, 48],
      [7, 7, 52],
    ]);
    for (const c of feasible) expect(violations(s, links, c.worker, c.load)).toEqual([]);
  });

  it('returns an empty list when nothing fits', () => {
    expect(feasibleCandidates(stream({ task: 'none' }), links, workers, loadOf)).toEqual([]);
    expect(feasibleCandidates(s, links, [], loadOf)).toEqual([]);
  });

  it('asks for the load only of workers that pass the load-independent constraints', () => {
    const asked: number[] = [];
    feasibleCandidates(s, links, workers, (w) => {
      asked.push(w.index);
      return loadOf(w);
    });
    expect(asked).toEqual([0, 2, 4, 7]);
  });

  it('decides exactly as violations does, on random topologies', () => {
    // Small integer grids make exact ties with the bounds common, not just possible.
    const figure = fc.integer({ min: 0, max: 8 });
    const workerSpec = fc.record({
      cluster: fc.constantFrom(edge, office, cloud),
      task: fc.constantFrom('detect', 'classify'),
      accuracy: fc.integer({ min: 0, max: 4 }).map((a) => a / 4),
      fixedDelayMs: figure,
      extraDelayMs: figure,
      capacity: fc.integer({ min: 0, max: 8 }),
      load: fc.integer({ min: 0, max: 8 }),
    });
    const streamSpec = fc.record({
      task: fc.constantFrom('detect', 'classify'),
      minAccuracy: fc.integer({ min: 0, max: 4 }).map((a) => a / 4),
      size: fc.constantFrom(0.25, 0.5, 1),
      rate: fc.integer({ min: 1, max: 8 }),
      transmissionMsPerSize: figure,
      accessDelayMs: figure,
      maxDelayMs: fc.integer({ min: 0, max: 120 }),
    });
    fc.assert(
      fc.property(fc.array(workerSpec, { maxLength: 8 }), streamSpec, (specs, overrides) => {
        const pool = specs.map((spec, index) =>
          worker(index, { ...spec, maxDelayMs: spec.fixedDelayMs + spec.extraDelayMs }),
        );
        const load = (w: Worker): number => specs[w.index]?.load ?? 0;
        const str = stream(overrides);
        const expected = pool
          .filter((w) => violations(str, links, w, load(w)).length === 0)
          .map((w) => candidateFor(str, links, w, load(w)));
        expect(feasibleCandidates(str, links, pool, load)).toEqual(expected);
      }),
    );
  });
});
