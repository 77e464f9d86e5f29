/**
 * The JSON line's figures from the conditions' results: per condition its learning rate, rounds to
 * the target (with whether it was reached) and accuracy at the round budget; the round speed-ups
 * against their targets (a lower bound when FedSGD did not reach the target within its cap, 0 when
 * FedAvg did not); the best non-IID contender's accuracy at the budget minus FedAvg's, in points;
 * the best robust aggregator's accuracy with poisoned trainers minus the clean FedAvg's, in points,
 * against its target; FedBuff's simulated time to the target against synchronous rounds'. A
 * figure whose conditions did not run is left out.
 */
import type { Target } from '../support/report.js';
import { budgetComparison, poisonedComparison, snake, speedups } from './conditions.js';
import { describeSpeedup, speedup } from './curves.js';
import type { ConditionResult } from './execute.js';

/** The JSON line's figures and targets from the results. */
function figuresOf(
  results: ReadonlyMap<string, ConditionResult>,
  central: number,
  target: number,
  budget: number,
): { figures: Record<string, number>; targets: Record<string, Target>; notes: string[] } {
  const figures: Record<string, number> = {
    central_test_accuracy: central,
    target_accuracy: target,
  };
  const targets: Record<string, Target> = {};
  const notes: string[] = [];
  const members: readonly string[] = [
    budgetComparison.baseline,
    ...budgetComparison.contenders,
    poisonedComparison.clean,
    poisonedComparison.poisoned,
    ...poisonedComparison.robust,
  ];
  for (const r of results.values()) {
    const id = snake(r.condition.id);
    figures[`eta_${id}`] = r.rate;
    if (r.serverRate !== undefined) figures[`eta_server_${id}`] = r.serverRate;
    if (r.condition.goal === 'target') {
      figures[`rounds_to_target_${id}`] = r.reach.rounds;
      figures[`reached_target_${id}`] = r.reach.kind === 'reached' ? 1 : 0;
    }
    if (r.atBudget !== undefined && members.includes(r.condition.id)) {
      figures[`accuracy_at_budget_${id}`] = r.atBudget;
    }
  }
  for (const s of speedups) {
    const sgd = results.get(s.fedsgd);
    const avg = results.get(s.fedavg);
    if (sgd === undefined || avg === undefined) continue;
    const { value, note } = describeSpeedup(speedup(sgd.reach, avg.reach));
    figures[s.figure] = value;
    targets[s.figure] = { value, op: '>=', target: s.target };
    notes.push(`${s.figure} = ${value.toFixed(2)}: ${note}`);
  }
  const baseline = results.get(budgetComparison.baseline)?.atBudget;
  const contenders = budgetComparison.contenders
    .map((id) => results.get(id)?.atBudget)
    .filter((a): a is number => a !== undefined);
  if (baseline !== undefined && contenders.length > 0) {
    const value = 100 * (Math.max(...contenders) - baseline);
    figures[budgetComparison.figure] = value;
    notes.push(
      `${budgetComparison.figure} = ${value.toFixed(2)} points at ${budget} rounds (no target)`,
    );
  }
  poisonedFigure(results, budget, { figures, targets, notes });
  return { figures, targets, notes };
}

/** fl_poisoned_robust_minus_clean into `out`, when the clean run and a robust one ran. */
function poisonedFigure(
  results: ReadonlyMap<string, ConditionResult>,
  budget: number,
  out: { figures: Record<string, number>; targets: Record<string, Target>; notes: string[] },
): void {
  const { figures, targets, notes } = out;
  const clean = results.get(poisonedComparison.clean)?.atBudget;
  const robust = poisonedComparison.robust
    .map((id) => ({ id, at: results.get(id)?.atBudget }))
    .filter(
      (r): r is { id: (typeof poisonedComparison.robust)[number]; at: number } =>
        r.at !== undefined,
    );
  if (clean !== undefined && robust.length > 0) {
    const top = robust.reduce((a, b) => (b.at > a.at ? b : a));
    const value = 100 * (top.at - clean);
    figures[poisonedComparison.figure] = value;
    targets[poisonedComparison.figure] = { value, op: '>=', target: poisonedComparison.target };
    notes.push(
      `${poisonedComparison.figure} = ${value.toFixed(2)} points at ${budget} rounds (${top.id} against unpoisoned ${poisonedComparison.clean})`,
    );
  }
}

/** FedBuff against synchronous rounds, in simulated time units. */
interface FedBuffSummary {
  /** Synchronous rounds' time to the target (undefined: not reached). */
  readonly syncTime: number | undefined;
  readonly asyncTime: number | undefined;
  readonly steps: number;
  readonly refused: number;
  readonly received: number;
  readonly meanStaleness: number;
}

/** The target for fedbuff_time_speedup (Nguyen et al. report several times). */
const fedbuffTarget = 2;

/**
 * fedbuff_time_speedup = synchronous time to the target over FedBuff's (0 when FedBuff did not
 * reach it, a lower bound noted when only FedBuff did: the synchronous time is then its cap's).
 */
function fedbuffFigures(summary: FedBuffSummary, syncCapTime: number) {
  const figures: Record<string, number> = {
    fedbuff_steps: summary.steps,
    fedbuff_updates_received: summary.received,
    fedbuff_updates_refused: summary.refused,
    fedbuff_mean_staleness: summary.meanStaleness,
  };
  if (summary.asyncTime !== undefined) figures['fedbuff_time_to_target'] = summary.asyncTime;
  if (summary.syncTime !== undefined) figures['sync_time_to_target'] = summary.syncTime;
  const value =
    summary.asyncTime === undefined ? 0 : (summary.syncTime ?? syncCapTime) / summary.asyncTime;
  figures['fedbuff_time_speedup'] = value;
  const note =
    summary.asyncTime === undefined
      ? 'FedBuff did not reach the target'
      : summary.syncTime === undefined
        ? 'lower bound: synchronous rounds did not reach the target in their cap'
        : 'both reached the target';
  const targets: Record<string, Target> = {
    fedbuff_time_speedup: { value, op: '>=', target: fedbuffTarget },
  };
  return { figures, targets, note: `fedbuff_time_speedup = ${value.toFixed(2)}: ${note}` };
}

export { figuresOf, fedbuffFigures, fedbuffTarget };
export type { FedBuffSummary };
