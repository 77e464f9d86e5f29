/**
 * bench/fl-learning's learning-rate race: the fewest rounds to the target wins, else the best
 * accuracy, a diverged rate last; the winner's run is the one continued, the others closed.
 */
import { describe, expect, it } from 'vitest';
import type { CurvePoint } from '../../../bench/fl-learning/curves.js';
import type { ConditionRun, StopRule } from '../../../bench/fl-learning/run.js';
import { chooseTrial, tuneAtBudget, tuneRate } from '../../../bench/fl-learning/tune.js';

const trial = (rate: number, reachedAt: number | undefined, best: number, diverged = false) => ({
  rate,
  reachedAt,
  best,
  diverged,
});

describe('chooseTrial', () => {
  it('prefers the fewest rounds to the target, then the best accuracy, diverged last', () => {
    expect(
      chooseTrial([trial(0.1, 30, 0.95), trial(0.2, 20, 0.91), trial(0.4, undefined, 0.99)]),
    ).toBe(1);
    expect(chooseTrial([trial(0.1, undefined, 0.8), trial(0.2, undefined, 0.85)])).toBe(1);
    expect(chooseTrial([trial(0.1, undefined, 0.1), trial(0.2, 5, 0.99, true)])).toBe(0);
    // A tie keeps the grid's order.
    expect(chooseTrial([trial(0.1, 10, 0.9), trial(0.2, 10, 0.9)])).toBe(0);
    expect(() => chooseTrial([])).toThrow(/empty/);
  });
});

/** A run whose accuracy after round r is `accuracy(r)`; records its advances and closing. */
function fakeRun(accuracy: (round: number) => number) {
  const curve: CurvePoint[] = [{ round: 0, accuracy: 0, loss: 1 }];
  const log: string[] = [];
  let rounds = 0;
  const run: ConditionRun = {
    curve,
    get rounds() {
      return rounds;
    },
    divergedAt: undefined,
    ms: 1,
    advance: (stop: StopRule) => {
      log.push(`advance to ${stop.maxRounds}`);
      while (rounds < stop.maxRounds && !curve.some((p) => p.accuracy >= stop.target)) {
        rounds += 1;
        curve.push({ round: rounds, accuracy: accuracy(rounds), loss: 0 });
      }
      return Promise.resolve();
    },
    close: () => {
      log.push('closed');
      return Promise.resolve();
    },
  };
  return { run, log };
}

describe('tuneRate', () => {
  const stop = { target: 0.9, evalEvery: 1 };
  /** Rates racing runs whose accuracy after round r is min(1, rate r). */
  function race() {
    const runs = new Map<number, ReturnType<typeof fakeRun>>();
    const start = (rate: number) => {
      const made = fakeRun((r) => Math.min(1, rate * r));
      runs.set(rate, made);
      return Promise.resolve(made.run);
    };
    return { runs, start };
  }

  it('advances every rate in lockstep and stops at the first to reach the target', async () => {
    const { runs, start } = race();
    const tuned = await tuneRate([0.01, 0.05, 0.02], start, stop, 100);
    expect(tuned.rate).toBe(0.05);
    expect(tuned.run).toBe(runs.get(0.05)?.run);
    expect(tuned.raceRounds).toBe(18);
    expect(tuned.trials.map((t) => t.reachedAt)).toEqual([undefined, 18, undefined]);
    expect(runs.get(0.01)?.run.rounds).toBe(18);
    expect(runs.get(0.01)?.log.at(-1)).toBe('closed');
    expect(runs.get(0.05)?.log).not.toContain('closed');
  });

  it('picks the best accuracy when no rate reaches the target within the race', async () => {
    const { runs, start } = race();
    const tuned = await tuneRate([0.01, 0.0625, 0.02], start, stop, 10);
    expect(tuned).toMatchObject({ rate: 0.0625, raceRounds: 10 });
    expect(tuned.trials.map((t) => t.best)).toEqual([0.1, 0.625, 0.2]);
    // The trial curves are copies: continuing the chosen run leaves its trial's curve as it was.
    await tuned.run.advance({ ...stop, maxRounds: 100, minRounds: 0 });
    expect(tuned.run.rounds).toBe(15);
    expect(tuned.trials[1]?.curve).toHaveLength(11);
    expect(runs.get(0.0625)?.log.at(-1)).toBe('advance to 100');
  });

  it('runs no race for a single rate or a zero-round race', async () => {
    const made = fakeRun(() => 0.5);
    const tuned = await tuneRate([0.3], () => Promise.resolve(made.run), stop, 10);
    expect(tuned).toMatchObject({ rate: 0.3, trials: [], raceRounds: 0 });
    expect(made.log).toEqual([]);
    const none = await tuneRate([0.3, 0.6], () => Promise.resolve(fakeRun(() => 0).run), stop, 0);
    expect(none.rate).toBe(0.3);
  });
});

describe('tuneAtBudget', () => {
  const stop = { target: 2, evalEvery: 1 };

  it('runs every rate to the budget and keeps the best accuracy there, not the best seen', async () => {
    const made = new Map<number, ReturnType<typeof fakeRun>>();
    // 0.3 peaks early and falls; 0.1 climbs slowly; 0.2 ends highest at round 10.
    const shapes: Record<number, (r: number) => number> = {
      0.1: (r) => r / 20,
      0.2: (r) => r / 16,
      0.3: (r) => (r < 3 ? 0.9 : 0.4),
    };
    const start = (rate: number) => {
      const m = fakeRun(shapes[rate] ?? (() => 0));
      made.set(rate, m);
      return Promise.resolve(m.run);
    };
    const tuned = await tuneAtBudget([0.1, 0.2, 0.3], start, stop, 10);
    expect(tuned).toMatchObject({ rate: 0.2, raceRounds: 10 });
    expect(tuned.run).toBe(made.get(0.2)?.run);
    expect([...made.values()].map((m) => m.run.rounds)).toEqual([10, 10, 10]);
    expect(made.get(0.3)?.log.at(-1)).toBe('closed');
    expect(made.get(0.2)?.log).not.toContain('closed');
    expect(tuned.trials.map((t) => t.best)).toEqual([0.5, 0.625, 0.9]);
  });

  it('runs nothing for a single rate', async () => {
    const made = fakeRun(() => 0.5);
    const tuned = await tuneAtBudget([0.01], () => Promise.resolve(made.run), stop, 10);
    expect(tuned).toMatchObject({ rate: 0.01, trials: [], raceRounds: 0 });
    expect(made.log).toEqual([]);
  });
});
