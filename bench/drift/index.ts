/**
 * bench/drift: does the accuracy objective hold when the inputs shift, what does it cost, and
 * does the drift show? Per condition (the held-out digits clean and under each perturbation of
 * shared/training/perturb.ts): edge-only, cloud-only, the static Threshold cut calibrated on
 * clean validation data, and joint inference with the objective (online calibration from
 * offloaded and shadowed samples). Targets with an objective of 1 point: the worst condition's
 * joint accuracy within 1 point of the cloud's, clean offload at most 3 points above the static
 * cut's.
 */
import { argmax } from '../../shared/inference/task.js';
import { loadMnist } from '../../shared/training/data.js';
import type { Split } from '../../shared/training/data.js';
import { perturbImages, perturbationSuite } from '../../shared/training/perturb.js';
import { writeLinePlot } from '../support/plot.js';
import { finish, printTable } from '../support/report.js';
import type { Target } from '../support/report.js';
import { detectionConditions } from './detection.js';
import type { DetectionRow } from './detection.js';
import { runEpisode } from './episode.js';
import type { EpisodeResult } from './episode.js';
import {
  accuracy,
  jointDeps,
  loadModels,
  newWindow,
  scoreSplit,
  staticThreshold,
  staticRun,
  stream,
} from './conditions.js';
import type { Models, Scored, StreamSettings } from './conditions.js';

const objectivePoints = 1;
/** Inputs per stream: the held-out split repeated, each pass perturbed with its own seed. */
const streamLength = Number(process.env['DRIFT_STREAM'] ?? 20_000);

/** `length` inputs: passes over `split`, pass k transformed by `apply(x, k)`. */
function passes(
  split: Split,
  length: number,
  apply: (x: Float32Array, pass: number) => Float32Array,
): Split {
  const count = Math.ceil(length / split.n);
  const x = new Float32Array(count * split.n * 784);
  const y = new Uint8Array(count * split.n);
  for (let k = 0; k < count; k += 1) {
    x.set(apply(split.x, k), k * split.n * 784);
    y.set(split.y, k * split.n);
  }
  return { n: length, x: x.subarray(0, length * 784), y: y.subarray(0, length) };
}

/** Which perturbation the episode shifts to: detected by the reference, and costly at the edge. */
const episodeShift = 'noise sigma 0.1';
const episodeRequests = Number(process.env['DRIFT_EPISODE_REQUESTS'] ?? 2500);

async function episode(
  data: ReturnType<typeof loadMnist>,
  models: Awaited<ReturnType<typeof loadModels>>,
): Promise<EpisodeResult> {
  const shift = perturbationSuite.find((p) => p.label === episodeShift)!;
  const clean = data.test;
  const shifted = { ...clean, x: perturbImages(clean.x, clean.n, 28, 28, shift, 101) };
  const cloudRight = async (split: Split) => {
    const s = await scoreSplit(models, split);
    const right = new Uint8Array(s.n);
    for (let i = 0; i < s.n; i += 1) {
      right[i] = Number(argmax(s.cloud.subarray(i * 10, (i + 1) * 10)) === s.y[i]);
    }
    return right;
  };
  const cleanRight = await cloudRight(clean);
  return runEpisode({
    phases: [
      { label: 'clean', split: clean, cloudRight: cleanRight, requests: episodeRequests },
      {
        label: episodeShift,
        split: shifted,
        cloudRight: await cloudRight(shifted),
        requests: episodeRequests,
      },
      { label: 'clean again', split: clean, cloudRight: cleanRight, requests: episodeRequests },
    ],
    rows: 8,
    concurrency: 8,
    every: 25,
    redisUrl: process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379',
  });
}

const pct = (v: number) => Number((100 * v).toFixed(2));

/** Canvases per detection condition. */
const detectionStream = process.env['DRIFT_DETECTION_STREAM'] ?? 5_000;
/** The detection miner: why CrossEntropy by default, see detectionConditions' settings. */
const detectionMiner = process.env['DRIFT_DETECTION_MINER'] === 'IBT' ? 'IBT' : 'CrossEntropy';

/** A condition: the held-out digits, pass k transformed by `apply(x, k)`. */
interface Condition {
  label: string;
  apply: (x: Float32Array, pass: number) => Float32Array;
}

/** The classifier table's rows, with the figures the targets read. */
interface ClassifierTable {
  threshold: number;
  rows: Array<Array<string | number>>;
  /** The worst condition's joint minus cloud accuracy. */
  worst: number;
  /** Clean offload of joint inference minus the static cut's. */
  cleanIncrease: number;
}

/** What every classifier condition shares: the models, the clean warm-up and the static cut. */
interface ClassifierRun {
  models: Models;
  settings: StreamSettings;
  warm: Scored;
  threshold: number;
}

/** One condition's row: the static cut, and joint inference after a warm-up on clean traffic. */
async function measureCondition(run: ClassifierRun, test: Split, condition: Condition) {
  const { models, settings, warm, threshold } = run;
  const s = await scoreSplit(models, passes(test, streamLength, condition.apply));
  const window = newWindow(settings);
  const current = { s: warm };
  const deps = jointDeps(current, window, models.scorer, settings);
  // Warm: the service has been running on clean traffic when the shift arrives.
  await stream(deps, current, warm, { ...settings, seed: 3 });
  const online = await stream(deps, current, s, settings);
  const fixed = staticRun(s, threshold);
  const cloud = accuracy(s.cloud, s.y, s.n);
  const row = [
    condition.label,
    pct(accuracy(s.edge, s.y, s.n)),
    pct(cloud),
    pct(fixed.joint),
    pct(fixed.offload),
    pct(online.joint),
    pct(online.joint - cloud),
    pct(online.offload),
    pct(online.shadow),
    window.state().drift?.drifting ? 'yes' : 'no',
  ];
  return {
    row,
    jointMinusCloud: online.joint - cloud,
    offloadIncrease: online.offload - fixed.offload,
  };
}

/** Every classifier condition: clean, then each perturbation of the suite. */
async function classifierConditions(
  data: ReturnType<typeof loadMnist>,
  models: Models,
  settings: StreamSettings,
): Promise<ClassifierTable> {
  const validation = await scoreSplit(models, data.validation);
  const threshold = staticThreshold(validation, settings.objective);
  const warm = await scoreSplit(
    models,
    passes(data.validation, streamLength, (x) => x),
  );
  const conditions: Condition[] = [
    { label: 'clean', apply: (x: Float32Array) => x },
    ...perturbationSuite.map((p) => ({
      label: p.label,
      apply: (x: Float32Array, pass: number) => perturbImages(x, data.test.n, 28, 28, p, 11 + pass),
    })),
  ];
  const run: ClassifierRun = { models, settings, warm, threshold };
  const rows: Array<Array<string | number>> = [];
  let worst = Infinity;
  let cleanIncrease = Number.NaN;
  for (const condition of conditions) {
    const measured = await measureCondition(run, data.test, condition);
    worst = Math.min(worst, measured.jointMinusCloud);
    if (condition.label === 'clean') cleanIncrease = measured.offloadIncrease;
    rows.push(measured.row);
  }
  return { threshold, rows, worst, cleanIncrease };
}

function printClassifier(table: ClassifierTable, heldOut: number): void {
  printTable(
    `drift: ${streamLength} inputs per condition (passes over the ${heldOut} held-out digits), objective ${objectivePoints} point (static Threshold ${table.threshold} from clean validation, as npm run calibrate picks it)`,
    [
      'condition',
      'edge',
      'cloud',
      'static joint',
      'static offload',
      'joint',
      'joint - cloud',
      'offload',
      'shadow',
      'drift at end',
    ],
    table.rows,
  );
}

function printDetection(detection: readonly DetectionRow[]): void {
  printTable(
    `drift, detection pair: mAP@0.5 on ${detectionStream} canvases per condition (passes over the 1,000 held-out ones), ${detectionMiner}, NMS 0.6, objective 1 point`,
    ['condition', 'edge', 'cloud', 'joint', 'joint - cloud', 'offload', 'shadow', 'drift at end'],
    detection.map((r) => [
      r.label,
      pct(r.edge),
      pct(r.cloud),
      pct(r.joint),
      pct(r.joint - r.cloud),
      pct(r.offload),
      pct(r.shadow),
      r.drifting ? 'yes' : 'no',
    ]),
  );
}

function printEpisode(result: EpisodeResult): void {
  printTable(
    `drift episode over HTTP: two edge replicas and a cloud worker, ${episodeRequests} requests of 8 inputs per phase, objective 1 point`,
    ['phase', 'joint', 'cloud', 'joint - cloud', 'offload', 'shadow'],
    result.phases.map((p) => [
      p.label,
      pct(p.joint),
      pct(p.cloud),
      pct(p.joint - p.cloud),
      pct(p.offload),
      pct(p.shadow),
    ]),
  );
  process.stdout.write(
    `\ndrift reported ${result.detectionDelay} requests after the switch to ${episodeShift}; cleared ${result.clearDelay} requests after the return\n`,
  );
}

/** out/drift-episode.svg: offload, true and estimated loss and the drift flag over the episode. */
async function plotEpisode(result: EpisodeResult): Promise<void> {
  const plot = new URL('../../../out/drift-episode.svg', import.meta.url);
  await writeLinePlot(plot, {
    title: `Drift episode: clean, ${episodeShift}, clean (objective 1 point, 2 edge replicas)`,
    xTitle: 'requests (8 inputs each)',
    yTitle: 'percent / points',
    series: [
      {
        name: 'offload (%)',
        points: result.points.map((p) => ({ x: p.request, y: 100 * p.offload })),
      },
      {
        name: 'true joint - cloud (points)',
        points: result.points.map((p) => ({ x: p.request, y: 100 * p.trueJointMinusCloud })),
      },
      {
        name: '- estimated loss, replica 1 (points)',
        points: result.points.map((p) => ({
          x: p.request,
          y: -(p.estimatedLoss[0] ?? Number.NaN),
        })),
      },
      {
        name: 'drift reported (100 = yes)',
        points: result.points.map((p) => ({ x: p.request, y: p.drifting ? 100 : 0 })),
      },
    ],
    rules: [{ name: 'objective', y: -objectivePoints }],
    markers: false,
  });
  process.stdout.write(`plot: ${plot.pathname}\n`);
}

/** The JSON line's figures and targets. */
function driftFigures(
  classifier: ClassifierTable,
  detection: readonly DetectionRow[],
  result: EpisodeResult,
): { figures: Record<string, number>; targets: Record<string, Target> } {
  const { worst, cleanIncrease } = classifier;
  const detectionWorst = Math.min(...detection.map((r) => r.joint - r.cloud));
  const episodeWorst = Math.min(...result.phases.map((p) => p.joint - p.cloud));
  return {
    figures: {
      drift_worst_joint_minus_cloud: pct(worst),
      drift_clean_offload_increase: pct(cleanIncrease),
      drift_detection_delay_requests: result.detectionDelay,
      drift_clear_delay_requests: result.clearDelay,
      drift_episode_worst_joint_minus_cloud: pct(episodeWorst),
      drift_detection_pair_worst_joint_minus_cloud_map: pct(detectionWorst),
      drift_detection_pair_clean_offload: pct(detection[0]!.offload),
    },
    targets: {
      drift_detection_delay_requests: {
        value: result.detectionDelay < 0 ? Infinity : result.detectionDelay,
        op: '<=',
        target: 2000,
      },
      drift_detection_pair_worst_joint_minus_cloud_map: {
        value: pct(detectionWorst),
        op: '>=',
        target: -1,
      },
      drift_clear_delay_requests: {
        value: result.clearDelay < 0 ? Infinity : result.clearDelay,
        op: '<=',
        target: 2000,
      },
      drift_worst_joint_minus_cloud: { value: pct(worst), op: '>=', target: -1 },
      drift_clean_offload_increase: { value: pct(cleanIncrease), op: '<=', target: 3 },
    },
  };
}

async function main(): Promise<void> {
  const data = loadMnist();
  const models = await loadModels();
  const settings: StreamSettings = {
    objective: objectivePoints / 100,
    shadowRate: Number(process.env['SHADOW_RATE'] ?? 0.05),
    requestRows: 16,
    refreshEvery: 64,
    seed: 7,
  };
  const classifier = await classifierConditions(data, models, settings);
  const detection = await detectionConditions({
    objective: settings.objective,
    shadowRate: settings.shadowRate,
    length: Number(detectionStream),
    miner: detectionMiner,
  });
  const result = await episode(data, models);
  await models.close();
  printClassifier(classifier, data.test.n);
  printDetection(detection);
  printEpisode(result);
  await plotEpisode(result);
  const { figures, targets } = driftFigures(classifier, detection, result);
  finish('drift', figures, targets);
}

export { main };
