/**
 * Runs the ready conditions of the table in order: each races the learning rates of its grid
 * (or takes the rate another condition chose), then continues the winner's run to its goal: the
 * target accuracy within its cap (and at least the round budget when it is the baseline of a
 * budget comparison), or exactly the round budget. A condition with a server-rate grid (FedAdam)
 * takes its local rate from another condition and races its server etas at the budget.
 */
import type { Split } from '../../shared/training/data.js';
import { budgetComparison, poisonedComparison, rateGrids } from './conditions.js';
import type { ReadyCondition } from './conditions.js';
import { accuracyAt, reach } from './curves.js';
import type { CurvePoint, Reach } from './curves.js';
import { startRun } from './run.js';
import type { ConditionRun, RunDeps, StopRule } from './run.js';
import type { Settings } from './settings.js';
import { algorithmFor, federationFor } from './setup.js';
import type { Federation } from './simulate.js';
import { tuneAtBudget, tuneRate } from './tune.js';
import type { Tuned } from './tune.js';

/** What a condition gave. */
interface ConditionResult {
  readonly condition: ReadyCondition;
  /** The local learning rate. */
  readonly rate: number;
  /** The server optimizer's eta, for a condition with a server-rate grid. */
  readonly serverRate: number | undefined;
  /** The trials of the race (over local rates, or over server etas when serverRate is set). */
  readonly trials: Tuned['trials'];
  /** Rounds every rate of the grid ran in the race (0: no race). */
  readonly raceRounds: number;
  readonly curve: readonly CurvePoint[];
  readonly rounds: number;
  readonly divergedAt: number | undefined;
  /** Against the target (for every condition, whatever its goal). */
  readonly reach: Reach;
  /** Accuracy after the round budget, when the run went that far. */
  readonly atBudget: number | undefined;
  /** Milliseconds of the grid and the run. */
  readonly ms: number;
}

interface ExecuteDeps {
  readonly train: RunDeps['train'];
  readonly evaluate: RunDeps['evaluate'];
  /** The training digits the clients' indices point into. */
  readonly trainSplit: Split;
  /** A progress line (stderr). */
  readonly progress: (line: string) => void;
}

/** Whether `id` is a budget comparison's baseline, run to the target and at least the budget. */
const isBudgetBaseline = (id: string) =>
  id === budgetComparison.baseline || id === poisonedComparison.clean;

/**
 * The rates `condition` is tuned over: the rates fixed for its family, else the rate of the
 * condition it borrows from (its family's grid if that one did not run), else its grid.
 */
function ratesOf(
  condition: ReadyCondition,
  chosen: ReadonlyMap<string, number>,
  fixed: Settings['rates'],
): number[] {
  const pinned = fixed[condition.family];
  if (pinned !== undefined) return [...pinned];
  const { rates } = condition;
  if (!('from' in rates)) return [...rates];
  const taken = chosen.get(rates.from);
  return taken === undefined ? [...rateGrids[condition.family]] : [taken];
}

/** The final stop rule of `condition`'s run. */
function finalStop(condition: ReadyCondition, settings: Settings, target: number): StopRule {
  const evalEvery = settings.evalEvery;
  if (condition.goal === 'budget') {
    return { target, evalEvery, maxRounds: settings.budget, minRounds: settings.budget };
  }
  const cap = condition.family === 'fedsgd' ? settings.fedsgdMaxRounds : settings.fedavgMaxRounds;
  const minRounds = isBudgetBaseline(condition.id) ? Math.min(settings.budget, cap) : 0;
  return { target, evalEvery, maxRounds: cap, minRounds };
}

/**
 * `condition`'s grid raced: its local `rates` (by rounds to the target), or, for a condition with
 * a server-rate grid, its server etas at the budget with its one local rate.
 */
async function tuneCondition(
  condition: ReadyCondition,
  rates: readonly number[],
  settings: Settings,
  stop: { target: number; evalEvery: number },
  started: (rate: number, serverRate?: number) => Promise<ConditionRun>,
): Promise<{ tuned: Tuned; local: number; serverRate: number | undefined }> {
  if (condition.serverRates === undefined) {
    const raceRounds =
      condition.family === 'fedsgd' ? settings.raceRoundsFedsgd : settings.raceRoundsFedavg;
    const tuned = await tuneRate(rates, (rate) => started(rate), stop, raceRounds);
    return { tuned, local: tuned.rate, serverRate: undefined };
  }
  const local = rates[0];
  if (rates.length !== 1 || local === undefined) {
    throw new RangeError(
      `${condition.id} races server etas at one local rate, not ${rates.join(', ')}`,
    );
  }
  const grid = settings.rates.server ?? condition.serverRates;
  const tuned = await tuneAtBudget(grid, (eta) => started(local, eta), stop, settings.budget);
  return { tuned, local, serverRate: tuned.rate };
}

/** Runs `selected` (table order) and returns their results by id. */
async function executeConditions(
  selected: readonly ReadyCondition[],
  settings: Settings,
  target: number,
  deps: ExecuteDeps,
): Promise<Map<string, ConditionResult>> {
  const federations = new Map<string, Federation>();
  const federation = (split: ReadyCondition['split']) => {
    const known = federations.get(split);
    if (known !== undefined) return known;
    const built = federationFor(deps.trainSplit, split, settings);
    federations.set(split, built);
    return built;
  };
  const chosen = new Map<string, number>();
  const results = new Map<string, ConditionResult>();
  for (const condition of selected) {
    const fed = federation(condition.split);
    const started = (rate: number, serverRate?: number) =>
      startRun(
        fed,
        algorithmFor(condition, rate, settings.seed, {
          ...(serverRate === undefined ? {} : { serverRate }),
          ...(settings.attack === undefined ? {} : { attack: settings.attack }),
        }),
        {
          train: deps.train,
          evaluate: deps.evaluate,
          onPoint: (p) => {
            if (p.round % 50 === 0 && p.round > 0) {
              deps.progress(
                `${condition.id} eta=${rate}${serverRate === undefined ? '' : ` server eta=${serverRate}`} round ${p.round}: ${(100 * p.accuracy).toFixed(2)}%`,
              );
            }
          },
        },
      );
    const { tuned, local, serverRate } = await tuneCondition(
      condition,
      ratesOf(condition, chosen, settings.rates),
      settings,
      { target, evalEvery: settings.evalEvery },
      started,
    );
    chosen.set(condition.id, local);
    const { run } = tuned;
    await run.advance(finalStop(condition, settings, target));
    await run.close();
    const result: ConditionResult = {
      condition,
      rate: local,
      serverRate,
      trials: tuned.trials,
      raceRounds: tuned.raceRounds,
      curve: run.curve,
      rounds: run.rounds,
      divergedAt: run.divergedAt,
      reach: reach(run.curve, target, run.rounds),
      atBudget: run.rounds >= settings.budget ? accuracyAt(run.curve, settings.budget) : undefined,
      ms: run.ms + tuned.discardedMs,
    };
    results.set(condition.id, result);
    const got =
      result.reach.kind === 'reached'
        ? `target in ${result.reach.rounds} rounds`
        : `target not reached in ${result.rounds} rounds (best ${(100 * result.reach.best).toFixed(2)}%)`;
    const etas = `eta=${result.rate}${serverRate === undefined ? '' : `, server eta=${serverRate}`}`;
    deps.progress(`${condition.id}: ${etas}, ${got}, ${(result.ms / 1000).toFixed(0)} s`);
  }
  return results;
}

export { executeConditions, finalStop, ratesOf };
export type { ConditionResult, ExecuteDeps };
