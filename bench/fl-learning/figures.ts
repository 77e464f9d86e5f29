/**
 * The JSON line's figures from the conditions' results: per condition its learning rate, rounds to
 * the target (with whether it was reached) and accuracy at the round budget; the round speed-ups
 * against their targets (a lower bound when FedSGD did not reach the target within its cap, 0 when
 * FedAvg did not); the best non-IID contender's accuracy at the budget minus FedAvg's, in points.
 * A figure whose conditions did not run is left out.
 */
import type { Target } from '../support/report.js';
import { budgetComparison, snake, speedups } from './conditions.js';
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
  const members: readonly string[] = [budgetComparison.baseline, ...budgetComparison.contenders];
  for (const r of results.values()) {
    const id = snake(r.condition.id);
    figures[`eta_${id}`] = r.rate;
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
  return { figures, targets, notes };
}

export { figuresOf };
