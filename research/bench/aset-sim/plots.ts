/**
 * Per-window success over time (figures 4, 5a and 7 of the paper) for the lambda-60 and pattern
 * conditions: the best static policy, the threshold rule, ASET and the lookahead oracle, mean of
 * the seeds. The sweep gets no plot (its table says it).
 */
import { fileURLToPath } from 'node:url';
import { writeLinePlot } from '../../../bench/support/plot.js';
import type { PlotSeries } from '../../../bench/support/plot.js';
import type { Condition } from './conditions.js';
import type { JobResult } from './jobs.js';
import { percent } from './runs.js';
import type { ConditionRuns, ConditionSummary } from './tables.js';

/** Per-window success %, averaged over the seeds (windows with no resolved query skipped). */
function successSeries(name: string, runs: readonly JobResult[]): PlotSeries {
  return {
    name,
    points: runs[0]!.windows.map((window, k) => {
      const values = runs
        .map((run) => percent(run.windows[k]!, 'success'))
        .filter((v) => !Number.isNaN(v));
      return {
        x: window.endMs / 1000,
        y: values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : NaN,
      };
    }),
  };
}

/** Writes out/aset-sim-<condition>.svg and returns its path. */
async function plotCondition(
  out: URL,
  condition: Condition,
  runs: ConditionRuns,
  summary: ConditionSummary,
  seeds: number,
): Promise<string> {
  const oracle = runs.oracles.at(-1);
  const series = [
    successSeries(`best static: ${summary.best}`, runs.statics.get(summary.best)!),
    successSeries(`threshold rule, x = ${runs.threshold.x}`, runs.threshold.runs),
    ...(runs.aset === undefined ? [] : [successSeries('ASET', runs.aset.runs)]),
    ...(oracle === undefined
      ? []
      : [successSeries(`oracle, ${oracle.lookahead}-window lookahead`, oracle.runs)]),
  ];
  const file = new URL(`aset-sim-${condition.id}.svg`, out);
  await writeLinePlot(file, {
    title: `${condition.id}: success per window of 25 s from empty, mean of ${seeds} seeds`,
    xTitle: 'time (s)',
    yTitle: 'success %',
    series,
  });
  return fileURLToPath(file);
}

export { plotCondition };
