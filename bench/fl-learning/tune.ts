/**
 * The learning-rate grid, as McMahan et al. tuned eta per condition (the rate reaching the target
 * in the fewest rounds), run as a race: every rate of the grid advances one round at a time, in
 * lockstep, until one reaches the target. As all have run the same rounds, the first to get there
 * is the one a full run of every rate would pick, at a cost of (grid size) x (its rounds). The race
 * is bounded: if no rate reaches the target within `raceRounds`, the one with the highest accuracy
 * seen wins. A diverged rate drops out. The winner's run is returned to be continued to the
 * condition's end (the rounds are deterministic: that is the run a fresh start at that rate gives).
 */
import { accuracyAt, bestAccuracy, roundsToTarget } from './curves.js';
import type { CurvePoint } from './curves.js';
import type { ConditionRun, StopRule } from './run.js';

/** One rate's part in the race, as the choice sees it. */
interface Trial {
  readonly rate: number;
  /** Rounds to the target, if reached. */
  readonly reachedAt: number | undefined;
  /** The best test accuracy it reached. */
  readonly best: number;
  readonly diverged: boolean;
}

/** Orders trials best first (a stable order: ties keep the grid's order). */
function compareTrials(a: Trial, b: Trial): number {
  if (a.diverged !== b.diverged) return a.diverged ? 1 : -1;
  const ra = a.reachedAt ?? Infinity;
  const rb = b.reachedAt ?? Infinity;
  if (ra !== rb) return ra - rb;
  return b.best - a.best;
}

/** The index (into `trials`) of the best trial; throws on an empty grid. */
function chooseTrial(trials: readonly Trial[]): number {
  if (trials.length === 0) throw new RangeError('an empty learning-rate grid');
  let best = 0;
  trials.forEach((t, i) => {
    if (compareTrials(t, trials[best]!) < 0) best = i;
  });
  return best;
}

/** The grid's outcome: the chosen run (to be continued) and every trial with its curve. */
interface Tuned {
  readonly rate: number;
  readonly run: ConditionRun;
  readonly trials: ReadonlyArray<Trial & { readonly curve: readonly CurvePoint[] }>;
  /** Rounds every rate ran in the race (0: no race). */
  readonly raceRounds: number;
  /** Milliseconds of the rates not chosen (the chosen one's are in its run). */
  readonly discardedMs: number;
}

function trialOf(rate: number, run: ConditionRun, target: number) {
  return {
    rate,
    reachedAt: roundsToTarget(run.curve, target),
    best: bestAccuracy(run.curve),
    diverged: run.divergedAt !== undefined,
    curve: [...run.curve],
  };
}

/**
 * Races `rates` (each run started by `start`) for at most `raceRounds` rounds and returns the
 * winner's run, the others closed. One rate, or `raceRounds` 0, is no race: the first rate's run
 * is returned as started.
 */
async function tuneRate(
  rates: readonly number[],
  start: (rate: number) => Promise<ConditionRun>,
  stop: Omit<StopRule, 'maxRounds' | 'minRounds'>,
  raceRounds: number,
): Promise<Tuned> {
  const first = rates[0];
  if (first === undefined) throw new RangeError('an empty learning-rate grid');
  if (rates.length === 1 || raceRounds === 0) {
    return { rate: first, run: await start(first), trials: [], raceRounds: 0, discardedMs: 0 };
  }
  const runs: ConditionRun[] = [];
  for (const rate of rates) runs.push(await start(rate));
  const reached = () => runs.some((r) => roundsToTarget(r.curve, stop.target) !== undefined);
  let round = 0;
  while (round < raceRounds && !reached() && runs.some((r) => r.divergedAt === undefined)) {
    round += 1;
    for (const run of runs) await run.advance({ ...stop, maxRounds: round, minRounds: 0 });
  }
  const trials = runs.map((run, i) => trialOf(rates[i] ?? first, run, stop.target));
  const chosen = chooseTrial(trials);
  const run = runs[chosen];
  if (run === undefined) throw new Error(`trial ${chosen} of ${runs.length} chosen`);
  const others = runs.filter((r) => r !== run);
  await Promise.all(others.map((r) => r.close()));
  const discardedMs = others.reduce((sum, r) => sum + r.ms, 0);
  return { rate: rates[chosen] ?? first, run, trials, raceRounds: round, discardedMs };
}

/**
 * Races `rates` over exactly `budget` rounds each (one after the other, as none stops early) and
 * returns the run with the highest accuracy at the budget (a diverged run ranks last; ties keep
 * the grid's order): the choice for a condition compared at the round budget rather than by
 * rounds to the target. One rate is no race.
 */
async function tuneAtBudget(
  rates: readonly number[],
  start: (rate: number) => Promise<ConditionRun>,
  stop: Omit<StopRule, 'maxRounds' | 'minRounds'>,
  budget: number,
): Promise<Tuned> {
  const first = rates[0];
  if (first === undefined) throw new RangeError('an empty learning-rate grid');
  if (rates.length === 1) {
    return { rate: first, run: await start(first), trials: [], raceRounds: 0, discardedMs: 0 };
  }
  const runs: ConditionRun[] = [];
  const scores: number[] = [];
  for (const rate of rates) {
    const run = await start(rate);
    await run.advance({ ...stop, maxRounds: budget, minRounds: budget });
    runs.push(run);
    scores.push(run.divergedAt === undefined ? (accuracyAt(run.curve, budget) ?? -1) : -2);
  }
  let chosen = 0;
  scores.forEach((score, i) => {
    if (score > (scores[chosen] ?? -Infinity)) chosen = i;
  });
  const trials = runs.map((run, i) => trialOf(rates[i] ?? first, run, stop.target));
  const run = runs[chosen];
  if (run === undefined) throw new Error(`trial ${chosen} of ${runs.length} chosen`);
  const others = runs.filter((r) => r !== run);
  await Promise.all(others.map((r) => r.close()));
  const discardedMs = others.reduce((sum, r) => sum + r.ms, 0);
  return { rate: rates[chosen] ?? first, run, trials, raceRounds: budget, discardedMs };
}

export { chooseTrial, compareTrials, tuneRate, tuneAtBudget };
export type { Trial, Tuned };
