/**
 * The learning curves as SVG (bench/support/plot.ts): one plot per condition (its chosen run and
 * its learning-rate trials, the target as a rule), one per group of conditions compared (a split's
 * FedSGD against FedAvg as McMahan et al. plot them, the non-IID strategies at the budget, the
 * poisoned aggregators against clean FedAvg), and FedBuff against synchronous rounds by simulated
 * time.
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
  /** The server optimizer's eta, when the trials raced it (FedAdam). */
  readonly serverRate?: number;
  readonly curve: readonly CurvePoint[];
  /** The grid's trials (rate and curve), the chosen one included. */
  readonly trials: ReadonlyArray<{ readonly rate: number; readonly curve: readonly CurvePoint[] }>;
}

const percent = (curve: readonly CurvePoint[]) =>
  curve.map((p) => ({ x: p.round, y: 100 * p.accuracy }));

const etas = (c: PlottedCondition) =>
  `eta=${c.rate}${c.serverRate === undefined ? '' : `, server eta=${c.serverRate}`}`;

/** Writes `<dir>/<id>.svg`; returns its path. */
async function plotCondition(
  dir: string,
  condition: PlottedCondition,
  target: number,
): Promise<string> {
  const file = join(dir, `${condition.id}.svg`);
  const raced = condition.serverRate;
  const knob = raced === undefined ? 'eta' : 'server eta';
  const chosen = raced ?? condition.rate;
  const trials: PlotSeries[] = condition.trials
    .filter((t) => t.rate !== chosen)
    .map((t) => ({ name: `trial ${knob}=${t.rate}`, points: percent(t.curve) }));
  await writeLinePlot(file, {
    title: `${condition.label}: test accuracy by round`,
    xTitle: 'round',
    yTitle: 'test accuracy (%)',
    series: [{ name: `${etas(condition)} (chosen)`, points: percent(condition.curve) }, ...trials],
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
    series: plotted.map((c) => ({ name: `${c.label}, ${etas(c)}`, points: percent(c.curve) })),
    rules: [{ name: `target ${(100 * target).toFixed(2)}%`, y: 100 * target }],
    markers: false,
  });
  return file;
}

/** A curve by simulated time: accuracy (0-1) at each time. */
interface TimedCurve {
  readonly name: string;
  readonly points: ReadonlyArray<{ readonly time: number; readonly accuracy: number }>;
}

/** Writes `<dir>/<name>.svg`: test accuracy by simulated time; returns its path. */
async function plotByTime(
  dir: string,
  name: string,
  title: string,
  curves: readonly TimedCurve[],
  target: number,
): Promise<string> {
  const file = join(dir, `${name}.svg`);
  await writeLinePlot(file, {
    title,
    xTitle: "simulated time (1 = the fastest trainer's local training)",
    yTitle: 'test accuracy (%)',
    series: curves.map((c) => ({
      name: c.name,
      points: c.points.map((p) => ({ x: p.time, y: 100 * p.accuracy })),
    })),
    rules: [{ name: `target ${(100 * target).toFixed(2)}%`, y: 100 * target }],
    markers: false,
  });
  return file;
}

export { plotCondition, plotComparison, plotByTime };
export type { TimedCurve };
export type { PlottedCondition };
