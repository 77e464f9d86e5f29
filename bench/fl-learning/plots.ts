/**
 * The learning curves as SVG (bench/support/plot.ts): one plot per condition (its chosen run and
 * its learning-rate trials, the target as a rule) and one per split with every condition's chosen
 * run, as McMahan et al. plot FedSGD against FedAvg.
 */
import { join } from 'node:path';
import { writeLinePlot } from '../support/plot.js';
import type { PlotSeries } from '../support/plot.js';
import type { CurvePoint } from './curves.js';

/** A condition's curves for the plots. */
interface PlottedCondition {
  readonly id: string;
  readonly label: string;
  readonly rate: number;
  readonly curve: readonly CurvePoint[];
  /** The grid's trials (rate and curve), the chosen one included. */
  readonly trials: ReadonlyArray<{ readonly rate: number; readonly curve: readonly CurvePoint[] }>;
}

const percent = (curve: readonly CurvePoint[]) =>
  curve.map((p) => ({ x: p.round, y: 100 * p.accuracy }));

/** Writes `<dir>/<id>.svg`; returns its path. */
async function plotCondition(
  dir: string,
  condition: PlottedCondition,
  target: number,
): Promise<string> {
  const file = join(dir, `${condition.id}.svg`);
  const trials: PlotSeries[] = condition.trials
    .filter((t) => t.rate !== condition.rate)
    .map((t) => ({ name: `trial eta=${t.rate}`, points: percent(t.curve) }));
  await writeLinePlot(file, {
    title: `${condition.label}: test accuracy by round`,
    xTitle: 'round',
    yTitle: 'test accuracy (%)',
    series: [
      { name: `eta=${condition.rate} (chosen)`, points: percent(condition.curve) },
      ...trials,
    ],
    rules: [{ name: `target ${(100 * target).toFixed(2)}%`, y: 100 * target }],
    markers: false,
  });
  return file;
}

/** Writes `<dir>/<name>.svg` with every condition's chosen run; returns its path. */
async function plotComparison(
  dir: string,
  name: string,
  title: string,
  plotted: readonly PlottedCondition[],
  target: number,
): Promise<string> {
  const file = join(dir, `${name}.svg`);
  await writeLinePlot(file, {
    title,
    xTitle: 'round',
    yTitle: 'test accuracy (%)',
    series: plotted.map((c) => ({ name: `${c.label}, eta=${c.rate}`, points: percent(c.curve) })),
    rules: [{ name: `target ${(100 * target).toFixed(2)}%`, y: 100 * target }],
    markers: false,
  });
  return file;
}

export { plotCondition, plotComparison };
export type { PlottedCondition };
