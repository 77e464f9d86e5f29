/**
 * One condition's table: success / QoS-failure / rejection % of every runner, mean ± 95%
 * Student-t interval over the seeds, and each runner's success minus the best static policy's,
 * paired by seed (same seed, same workload: the seeds differ far more from each other than the
 * policies do on one seed, so the paired interval is the one that says whether a gap is real).
 * "Best static" is the policy with the best mean over these seeds, in hindsight.
 */
import { bestStaticInHindsight } from '../../aset/sim/oracle.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import type { Outcomes } from '../../../shared/aset/window.js';
import { printTable } from '../../../bench/support/report.js';
import type { Condition } from './conditions.js';
import type { JobResult } from './jobs.js';
import { percent, successOf } from './runs.js';
import { formatCi, meanCi } from './stats.js';
import type { MeanCi } from './stats.js';

interface ConditionRuns {
  readonly statics: ReadonlyMap<PolicyName, JobResult[]>;
  readonly threshold: { readonly x: number; readonly runs: JobResult[] };
  readonly cycles: ReadonlyArray<{ readonly policies: readonly PolicyName[]; runs: JobResult[] }>;
  readonly oracles: ReadonlyArray<{ readonly lookahead: number; readonly runs: JobResult[] }>;
  readonly aset?: { readonly label: string; readonly runs: JobResult[] };
  /** The network itself, where a static policy was deployed in its place. */
  readonly network?: JobResult[];
}

/** Paired differences to the best static policy (points), per reference. */
interface ConditionSummary {
  readonly condition: Condition;
  readonly best: PolicyName;
  readonly bestSuccess: number;
  readonly threshold: MeanCi;
  readonly cycle: MeanCi;
  readonly oracles: ReadonlyMap<number, MeanCi>;
  readonly aset?: MeanCi;
  /** ASET minus the threshold rule, paired by seed. */
  readonly asetMinusThreshold?: MeanCi;
}

const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
const paired = (a: readonly number[], b: readonly number[]) => meanCi(a.map((v, i) => v - b[i]!));

function bestStatic(statics: ReadonlyMap<PolicyName, JobResult[]>): PolicyName {
  let best: PolicyName = policyNames[0];
  for (const p of policyNames) {
    if (mean(successOf(statics.get(p)!)) > mean(successOf(statics.get(best)!))) best = p;
  }
  return best;
}

/** The best of the alternations (best static with each other policy), by mean paired gap. */
function bestCycle(runs: ConditionRuns, bestValues: readonly number[]) {
  let chosen = runs.cycles[0]!;
  for (const c of runs.cycles) {
    if (mean(successOf(c.runs)) > mean(successOf(chosen.runs))) chosen = c;
  }
  return { ...chosen, gap: paired(successOf(chosen.runs), bestValues) };
}

function hindsightRuns(runs: ConditionRuns, seeds: number) {
  return Array.from({ length: seeds }, (_, i) =>
    bestStaticInHindsight(
      Object.fromEntries(policyNames.map((p) => [p, runs.statics.get(p)![i]!])) as Record<
        PolicyName,
        JobResult
      >,
    ),
  );
}

const oracleLabel = (lookahead: number) =>
  lookahead === 0 ? 'oracle, greedy (hindsight)' : `oracle, ${lookahead}-window lookahead`;

/** Prints the condition's table and returns its paired gaps. */
function reportCondition(
  condition: Condition,
  runs: ConditionRuns,
  seeds: number,
): ConditionSummary {
  const best = bestStatic(runs.statics);
  const bestValues = successOf(runs.statics.get(best)!);
  const cycle = bestCycle(runs, bestValues);
  const hindsight = hindsightRuns(runs, seeds);
  const row = (label: string, counted: readonly Outcomes[]) => [
    label,
    formatCi(meanCi(counted.map((o) => percent(o, 'success')))),
    formatCi(meanCi(counted.map((o) => percent(o, 'qosFailure')))),
    formatCi(meanCi(counted.map((o) => percent(o, 'rejected')))),
    formatCi(
      paired(
        counted.map((o) => percent(o, 'success')),
        bestValues,
      ),
    ),
  ];
  const countedOf = (list: ReadonlyArray<{ counted: Outcomes }>) => list.map((r) => r.counted);
  const rows = [
    ...policyNames.map((p) => row(p, countedOf(runs.statics.get(p)!))),
    ...(runs.aset === undefined ? [] : [row(runs.aset.label, countedOf(runs.aset.runs))]),
    ...(runs.network === undefined
      ? []
      : [row('ASET network (not deployed)', countedOf(runs.network))]),
    row(`threshold rule, x = ${runs.threshold.x}`, countedOf(runs.threshold.runs)),
    row(`best alternation: ${cycle.policies.join(' / ')} (best of 6)`, countedOf(cycle.runs)),
    ...runs.oracles.map((o) => row(oracleLabel(o.lookahead), countedOf(o.runs))),
    row('best static per seed (hindsight)', countedOf(hindsight)),
  ];
  printTable(
    `${condition.id}: % of queries over ${condition.durationMs / 1000} s from empty (counted from t = 0), mean ± 95% CI over ${seeds} seeds`,
    ['runner', 'success %', 'QoS failure %', 'rejected %', `success - ${best} (paired)`],
    rows,
  );
  process.stdout.write(
    `best static: ${best} (${mean(bestValues).toFixed(2)} %); hindsight best per seed: ${hindsight.map((h) => h.policy).join(', ')}\n`,
  );
  const thresholdValues = successOf(runs.threshold.runs);
  const asetValues = runs.aset === undefined ? undefined : successOf(runs.aset.runs);
  return {
    condition,
    best,
    bestSuccess: mean(bestValues),
    threshold: paired(thresholdValues, bestValues),
    cycle: cycle.gap,
    oracles: new Map(runs.oracles.map((o) => [o.lookahead, paired(successOf(o.runs), bestValues)])),
    ...(asetValues === undefined
      ? {}
      : {
          aset: paired(asetValues, bestValues),
          asetMinusThreshold: paired(asetValues, thresholdValues),
        }),
  };
}

export { reportCondition };
export type { ConditionRuns, ConditionSummary };
