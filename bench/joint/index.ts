/**
 * bench/joint: what edge-cloud joint inference buys on the held-out MNIST test split. The edge and
 * cloud models run once over every test sample; each hard-example miner is then swept over its
 * parameter, and every point answers each sample with the cloud's prediction when the miner calls
 * it hard and the edge's otherwise. Reports accuracy against offload ratio per miner (tables and
 * out/joint-accuracy-offload.svg), beside an oracle that offloads exactly the samples the edge
 * gets wrong. Target: with at most 25% offloaded, the best miner is within 0.5 points of the
 * cloud model alone. Accuracies and offloads are in percent.
 */
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { outcomes, score, sweep } from '../../shared/inference/calibrate.js';
import type { Outcomes, Point } from '../../shared/inference/calibrate.js';
import { hemNames } from '../../shared/crds/index.js';
import type { HemName } from '../../shared/crds/index.js';
import { createMiner } from '../../shared/inference/hem.js';
import { loadOnnxModel } from '../../shared/inference/onnx-runtime.js';
import { classes, loadMnist } from '../../shared/training/data.js';
import { writeLinePlot } from '../support/plot.js';
import type { PlotSeries } from '../support/plot.js';
import { finish, printTable } from '../support/report.js';

const offloadBudget = 0.25;
const cloudSlackPoints = 0.5;
const randomSeeds = [1, 2, 3, 4, 5];

type Plan =
  | { kind: 'sweep'; key: 'threshold' | 'margin' }
  | { kind: 'random' }
  | { kind: 'endpoint' }
  | { kind: 'not-applicable'; why: string };

// A Record over every name, so a miner added to hem.ts fails to compile here until it is planned.
const plans: Record<HemName, Plan> = {
  Threshold: { kind: 'sweep', key: 'threshold' },
  CrossEntropy: { kind: 'sweep', key: 'threshold' },
  Margin: { kind: 'sweep', key: 'margin' },
  Random: { kind: 'random' },
  EdgeOnly: { kind: 'endpoint' },
  CloudOnly: { kind: 'endpoint' },
  IBT: {
    kind: 'not-applicable',
    why: 'reads detection boxes (share of low-score boxes); both models are 10-class classifiers',
  },
};

/** Walks up from this file to the checkout, so the bench works from dist/ and from sources. */
function repoRoot(): URL {
  let dir = new URL('./', import.meta.url);
  for (;;) {
    if (existsSync(new URL('package.json', dir)) && existsSync(new URL('models/', dir))) return dir;
    const parent = new URL('../', dir);
    if (parent.href === dir.href) throw new Error('no package.json with models/ above the bench');
    dir = parent;
  }
}

function recordedTestAccuracy(root: URL, model: string): number {
  const card = JSON.parse(readFileSync(new URL(`models/${model}.json`, root), 'utf8')) as {
    accuracy?: { test?: unknown };
  };
  const value = card.accuracy?.test;
  if (typeof value !== 'number') throw new Error(`models/${model}.json: no accuracy.test`);
  return value;
}

async function predict(root: URL, model: string, x: Float32Array, n: number) {
  const onnx = await loadOnnxModel(
    new Uint8Array(readFileSync(new URL(`models/${model}.onnx`, root))),
  );
  try {
    if (onnx.outputWidth !== classes) throw new Error(`${model}: ${onnx.outputWidth} outputs`);
    return await onnx.run(x, n);
  } finally {
    await onnx.close();
  }
}

/**
 * Random over ratios 0..1 (finer where offload is 5-30%), averaged over seeds. Each seed's stream
 * restarts for every ratio, so one seed sends a nested set of samples as the ratio grows.
 */
function sweepRandom(o: Outcomes): Point[] {
  const ratios = new Set<number>();
  for (let i = 0; i <= 50; i++) ratios.add(i / 50);
  for (let i = 5; i <= 30; i++) ratios.add(i / 100);
  return [...ratios]
    .sort((a, b) => a - b)
    .map((ratio) => {
      const runs = randomSeeds.map((seed) => score(createMiner('Random', { ratio, seed }), o));
      const mean = (f: (r: { hard: number; correct: number }) => number) =>
        runs.reduce((sum, r) => sum + f(r), 0) / runs.length;
      const correct = runs.map((r) => r.correct);
      return {
        parameter: ratio,
        hard: mean((r) => r.hard),
        correct: mean((r) => r.correct),
        correctRange: [Math.min(...correct), Math.max(...correct)] as const,
      };
    });
}

/**
 * The best any miner could do offloading k samples: first every sample the edge gets wrong and
 * the cloud right, then samples where both agree on being right or wrong, and only once those
 * run out samples the cloud gets wrong and the edge right.
 */
function oracleCorrect(k: number, o: Outcomes): number {
  return o.edgeCorrect + Math.min(k, o.fixable) - Math.max(0, k - (o.n - o.breakable));
}

const pct = (count: number, n: number) => (100 * count) / n;
const fixed = (value: number, digits = 2) => value.toFixed(digits);

/** About 15 rows per miner: the points nearest to these offloads. */
const tableOffloads = [0, 1, 2, 3, 4, 5, 6, 8, 10, 12.5, 15, 20, 25, 30, 40, 60, 80, 100];

function thin(points: readonly Point[], n: number): Point[] {
  const picked = new Set<Point>();
  for (const target of tableOffloads) {
    let best = points[0]!;
    for (const p of points) {
      if (Math.abs(pct(p.hard, n) - target) < Math.abs(pct(best.hard, n) - target)) best = p;
    }
    picked.add(best);
  }
  return points.filter((p) => picked.has(p));
}

interface Summary {
  best?: Point;
  cheapest?: Point;
}

function summarize(points: readonly Point[], n: number, cloudCorrect: number): Summary {
  let best: Point | undefined;
  let cheapest: Point | undefined;
  // Tolerances absorb float noise in Random's averaged counts, nothing more.
  const budget = offloadBudget * n + 1e-9;
  const goal = cloudCorrect - (cloudSlackPoints / 100) * n - 1e-9;
  for (const p of points) {
    if (p.hard <= budget) {
      if (
        best === undefined ||
        p.correct > best.correct ||
        (p.correct === best.correct && p.hard < best.hard)
      )
        best = p;
    }
    if (p.correct >= goal && (cheapest === undefined || p.hard < cheapest.hard)) cheapest = p;
  }
  return { best, cheapest };
}

const snake = (name: string) => name.replace(/([a-z])([A-Z])/g, '$1_$2').toLowerCase();

/** Each model's share of the test split it gets right, as measured here. */
interface Measured {
  readonly edge: number;
  readonly cloud: number;
}

/** The models alone, checked against the accuracy each model's card recorded. */
function checkModelsAlone(root: URL, o: Outcomes, n: number): Measured {
  const { edgeCorrect, cloudCorrect } = o;
  const recorded = {
    edge: recordedTestAccuracy(root, 'edge'),
    cloud: recordedTestAccuracy(root, 'cloud'),
  };
  const measured = { edge: edgeCorrect / n, cloud: cloudCorrect / n };
  printTable(
    'models alone (accuracy.test recorded in models/*.json by npm run models)',
    ['model', 'correct', 'accuracy %', 'recorded %', 'matches'],
    (['edge', 'cloud'] as const).map((m) => [
      m,
      m === 'edge' ? edgeCorrect : cloudCorrect,
      fixed(100 * measured[m], 3),
      fixed(100 * recorded[m], 3),
      Math.round(recorded[m] * n) === Math.round(measured[m] * n) ? 'yes' : 'NO',
    ]),
  );
  for (const m of ['edge', 'cloud'] as const) {
    if (Math.round(recorded[m] * n) !== Math.round(measured[m] * n)) {
      throw new Error(
        `${m}: ${measured[m]} on the test split, models/${m}.json says ${recorded[m]}`,
      );
    }
  }
  return measured;
}

function printDisagreement(o: Outcomes, n: number): void {
  printTable(
    'where the two models disagree',
    ['case', 'samples', '% of test'],
    [
      ['edge wrong, cloud right (what offloading can fix)', o.fixable, fixed(pct(o.fixable, n))],
      [
        'edge right, cloud wrong (what offloading can break)',
        o.breakable,
        fixed(pct(o.breakable, n)),
      ],
      ['both wrong', o.bothWrong, fixed(pct(o.bothWrong, n))],
    ],
  );
}

/** Why a miner that is not applicable answers nothing here, with what it says when asked. */
function notApplicable(name: HemName, why: string, o: Outcomes): string {
  // Shown, not assumed: the real miner refuses a classifier's output.
  let answer = 'accepted the classifier output (unexpected)';
  try {
    createMiner(name).isHard(o.edgeOutputs[0]!);
  } catch (err) {
    answer = `rejects it: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
  }
  return `${name}: not applicable, it ${why}; createMiner('${name}').isHard ${answer}`;
}

/** Every applicable miner's points, in hemNames order, and a note for each of the others. */
function minerCurves(o: Outcomes) {
  const curves = new Map<HemName, Point[]>();
  const notes: string[] = [];
  for (const name of hemNames) {
    const plan = plans[name];
    let points: Point[];
    if (plan.kind === 'sweep') points = sweep(name, plan.key, o);
    else if (plan.kind === 'random') points = sweepRandom(o);
    else if (plan.kind === 'endpoint')
      points = [{ parameter: Number.NaN, ...score(createMiner(name), o) }];
    else {
      notes.push(notApplicable(name, plan.why, o));
      continue;
    }
    curves.set(name, points);
  }
  return { curves, notes };
}

function printRandomCurve(points: readonly Point[], o: Outcomes, n: number): void {
  printTable(
    `Random: ratio swept, mean over seeds ${randomSeeds.join(', ')} (${points.length} ratios; rows nearest to ${tableOffloads.length} offload levels)`,
    ['ratio', 'offload %', 'joint acc %', 'joint acc min..max over seeds %', 'oracle acc %'],
    thin(points, n).map((p) => [
      String(p.parameter),
      fixed(pct(p.hard, n)),
      fixed(pct(p.correct, n)),
      `${fixed(pct(p.correctRange![0], n))}..${fixed(pct(p.correctRange![1], n))}`,
      fixed(pct(oracleCorrect(Math.round(p.hard), o), n)),
    ]),
  );
}

function printSweptCurve(
  name: HemName,
  key: string,
  points: readonly Point[],
  o: Outcomes,
  n: number,
): void {
  printTable(
    `${name}: ${key} swept (${points.length} distinct offloads; rows nearest to ${tableOffloads.length} offload levels)`,
    [key, 'offloaded', 'offload %', 'joint acc %', 'oracle acc %'],
    thin(points, n).map((p) => [
      String(p.parameter),
      p.hard,
      fixed(pct(p.hard, n)),
      fixed(pct(p.correct, n)),
      fixed(pct(oracleCorrect(p.hard, o), n)),
    ]),
  );
}

/** One table per swept miner; an endpoint is a single point, shown in the summary only. */
function printCurves(curves: ReadonlyMap<HemName, Point[]>, o: Outcomes, n: number): void {
  for (const [name, points] of curves) {
    const plan = plans[name];
    if (plan.kind === 'random') printRandomCurve(points, o, n);
    else if (plan.kind === 'sweep') printSweptCurve(name, plan.key, points, o, n);
  }
}

/** Each miner's summary in hemNames order, then the oracle's. */
function summarizeAll(curves: ReadonlyMap<HemName, Point[]>, o: Outcomes, n: number) {
  const oraclePoints: Point[] = Array.from({ length: n + 1 }, (_, k) => ({
    parameter: k,
    hard: k,
    correct: oracleCorrect(k, o),
  }));
  const summaries = new Map<HemName | 'oracle', Summary>();
  for (const [name, points] of curves) summaries.set(name, summarize(points, n, o.cloudCorrect));
  summaries.set('oracle', summarize(oraclePoints, n, o.cloudCorrect));
  return summaries;
}

/** A summary point's parameter, offload % and joint accuracy %. */
function describe(name: HemName | 'oracle', p: Point | undefined, n: number): string[] {
  if (p === undefined) return ['not reached', '', ''];
  const parameter =
    name === 'oracle' ? `${p.hard} samples` : Number.isNaN(p.parameter) ? '-' : String(p.parameter);
  return [parameter, fixed(pct(p.hard, n)), fixed(pct(p.correct, n))];
}

function printSummary(
  summaries: ReadonlyMap<HemName | 'oracle', Summary>,
  measured: Measured,
  n: number,
): void {
  printTable(
    `summary: best joint accuracy with offload <= ${100 * offloadBudget}%, and the least offload within ${cloudSlackPoints} points of cloud only (${fixed(100 * measured.cloud - cloudSlackPoints)}%)`,
    [
      'HEM',
      `best <= ${100 * offloadBudget}%: parameter`,
      'offload %',
      'joint acc %',
      `least offload: parameter`,
      'offload %',
      'joint acc %',
    ],
    [...summaries].map(([name, s]) => [
      name === 'oracle' ? '(oracle, not a miner)' : name,
      ...describe(name, s.best, n),
      ...describe(name, s.cheapest, n),
    ]),
  );
}

/** The JSON line's figures, and the best joint accuracy a miner reaches within the budget. */
function jointFigures(
  summaries: ReadonlyMap<HemName | 'oracle', Summary>,
  measured: Measured,
  n: number,
) {
  const figures: Record<string, number> = {
    samples: n,
    edge_accuracy: Number(fixed(100 * measured.edge, 3)),
    cloud_accuracy: Number(fixed(100 * measured.cloud, 3)),
  };
  let bestUnderBudget = -Infinity;
  for (const [name, s] of summaries) {
    const key = name === 'oracle' ? 'oracle' : snake(name);
    if (s.best !== undefined) {
      figures[`${key}_best_accuracy_at_25pct_offload`] = Number(fixed(pct(s.best.correct, n), 3));
      if (name !== 'oracle') bestUnderBudget = Math.max(bestUnderBudget, pct(s.best.correct, n));
    }
    // Absent when no point of the sweep gets there (EdgeOnly, for one).
    if (s.cheapest !== undefined) {
      figures[`${key}_min_offload_within_0_5_points`] = Number(fixed(pct(s.cheapest.hard, n), 3));
    }
  }
  return { figures, bestUnderBudget };
}

/** The plotted curves: every swept miner's, then the oracle's. */
function plotSeries(curves: ReadonlyMap<HemName, Point[]>, o: Outcomes, n: number): PlotSeries[] {
  const series: PlotSeries[] = [...curves]
    .filter(([name]) => plans[name].kind !== 'endpoint')
    .map(([name, points]) => ({
      name: name === 'Random' ? `Random (mean of ${randomSeeds.length} seeds)` : name,
      points: points.map((p) => ({ x: pct(p.hard, n), y: pct(p.correct, n) })),
    }));
  // The oracle's curve is piecewise linear: its corners are enough.
  const corners = [0, o.fixable, n - o.breakable, n];
  series.push({
    name: 'oracle (edge-wrong samples first)',
    points: corners.map((k) => ({ x: pct(k, n), y: pct(oracleCorrect(k, o), n) })),
  });
  return series;
}

/** Accuracy against offload, all of it and up to 35%, with the models alone as rules. */
async function writePlots(
  root: URL,
  series: PlotSeries[],
  measured: Measured,
  n: number,
): Promise<void> {
  const out = new URL('out/', root);
  const rules = [
    { name: `edge only ${fixed(100 * measured.edge)}%`, y: 100 * measured.edge },
    { name: `cloud only ${fixed(100 * measured.cloud)}%`, y: 100 * measured.cloud },
    {
      name: `cloud only - ${cloudSlackPoints} points ${fixed(100 * measured.cloud - cloudSlackPoints)}%`,
      y: 100 * measured.cloud - cloudSlackPoints,
    },
  ];
  const files = {
    full: new URL('joint-accuracy-offload.svg', out),
    zoom: new URL('joint-accuracy-offload-zoom.svg', out),
  };
  const title = `Joint accuracy vs offload, MNIST test split (${n} samples)`;
  await writeLinePlot(files.full, {
    title,
    xTitle: 'offloaded to the cloud (% of samples)',
    yTitle: 'joint accuracy (%)',
    series,
    rules,
    xDomain: [0, 100],
    markers: false,
  });
  await writeLinePlot(files.zoom, {
    title: `${title}, offload up to 35%`,
    xTitle: 'offloaded to the cloud (% of samples)',
    yTitle: 'joint accuracy (%)',
    series,
    rules,
    xDomain: [0, 35],
    markers: false,
  });
  process.stdout.write(
    `\nplots: ${Object.values(files)
      .map((f) => relative(process.cwd(), fileURLToPath(f)))
      .join(', ')}\n`,
  );
}

export async function main(): Promise<void> {
  const root = repoRoot();
  const { test } = loadMnist();
  const n = test.n;
  const edge = await predict(root, 'edge', test.x, n);
  const cloud = await predict(root, 'cloud', test.x, n);
  const o = outcomes(test.y, edge, cloud, classes);

  process.stdout.write(
    `bench/joint: MNIST test split, ${n} samples; edge and cloud run once each (onnxruntime, in process)\n`,
  );
  const measured = checkModelsAlone(root, o, n);
  printDisagreement(o, n);

  const { curves, notes } = minerCurves(o);
  printCurves(curves, o, n);
  const summaries = summarizeAll(curves, o, n);
  printSummary(summaries, measured, n);
  for (const note of notes) process.stdout.write(`\n${note}\n`);
  const { figures, bestUnderBudget } = jointFigures(summaries, measured, n);

  await writePlots(root, plotSeries(curves, o, n), measured, n);

  const targetValue = Number(fixed(bestUnderBudget - 100 * measured.cloud, 3));
  finish('joint', figures, {
    joint_accuracy_at_25pct_offload_minus_cloud: {
      value: targetValue,
      op: '>=',
      target: -cloudSlackPoints,
    },
  });
}
