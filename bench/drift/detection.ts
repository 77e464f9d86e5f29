/**
 * The detection pair under drift (bench/drift): the held-out canvases clean and under the
 * detection suite (the perturbations that keep boxes where they are, and translation with its
 * boxes moved), answered by the serving path's joint inference with the objective, a
 * detection miner and the detector's drift reference, over precomputed model outputs. mAP@0.5
 * instead of accuracy; the objective counts an image as lost when its confident detections
 * differ from the cloud's.
 */
import { readFileSync } from 'node:fs';
import { createMiner } from '../../shared/inference/hem.js';
import { jointInfer } from '../../shared/inference/joint.js';
import type { JointDeps } from '../../shared/inference/joint.js';
import { openOnnxModel } from '../../shared/inference/onnx-runtime.js';
import { createOutlierScorer, parseDriftReference } from '../../shared/inference/outlier.js';
import type { OutlierScorer } from '../../shared/inference/outlier.js';
import type { Tensors } from '../../shared/inference/pool.js';
import { createQualityWindow } from '../../shared/inference/quality-window.js';
import type { QualityWindow } from '../../shared/inference/quality-window.js';
import { createTaskAdapter } from '../../shared/inference/task.js';
import type { TaskAdapter, TaskResult } from '../../shared/inference/task.js';
import type { Signature, Tensor } from '../../shared/inference/tensor.js';
import {
  canvasPixels,
  canvasSize,
  loadDetectionSet,
} from '../../shared/training/detection-data.js';
import type { DetectionSplit } from '../../shared/training/detection-data.js';
import { meanAveragePrecision } from '../../shared/training/detection-metrics.js';
import { detectionSuite, perturbImages, translateBoxes } from '../../shared/training/perturb.js';
import type { Perturbation } from '../../shared/training/perturb.js';
import { scoredBoxes } from '../support/detections.js';
import { benchWindowOptions, replayDeps } from './conditions.js';

const root = new URL('../../../', import.meta.url);
const outputs = ['boxes', 'scores', 'class_scores'] as const;
/** Values per canvas of each output ([64, 4], [64], [64, 10]). */
const widths = { boxes: 256, scores: 64, class_scores: 640 } as const;

type Outputs = Record<(typeof outputs)[number], Float32Array>;

interface Stream {
  split: DetectionSplit;
  edge: Outputs;
  cloud: Outputs;
}

async function runModel(file: string, images: Float32Array, n: number): Promise<Outputs> {
  const model = await openOnnxModel(new Uint8Array(readFileSync(new URL(`models/${file}`, root))));
  const out: Outputs = {
    boxes: new Float32Array(n * widths.boxes),
    scores: new Float32Array(n * widths.scores),
    class_scores: new Float32Array(n * widths.class_scores),
  };
  for (let from = 0; from < n; from += 256) {
    const rows = Math.min(256, n - from);
    const result = await model.run({
      image: {
        datatype: 'FP32',
        shape: [rows, 1, canvasSize, canvasSize],
        data: images.subarray(from * canvasPixels, (from + rows) * canvasPixels),
      },
    });
    for (const name of outputs) {
      out[name].set(result[name]!.data as Float32Array, from * widths[name]);
    }
  }
  await model.close();
  return out;
}

/** `length` canvases: passes over `split`, pass k perturbed with seed 11 + k. */
function passes(
  split: DetectionSplit,
  length: number,
  apply: (images: Float32Array, boxes: DetectionSplit['boxes'], pass: number) => DetectionSplit,
): DetectionSplit {
  const images = new Float32Array(length * canvasPixels);
  const boxes: DetectionSplit['boxes'] = [];
  for (let k = 0; boxes.length < length; k += 1) {
    const pass = apply(split.images, split.boxes, k);
    const take = Math.min(split.n, length - boxes.length);
    images.set(pass.images.subarray(0, take * canvasPixels), boxes.length * canvasPixels);
    boxes.push(...pass.boxes.slice(0, take));
  }
  return { images, boxes, n: length };
}

const signature: Signature = {
  inputs: [
    { name: 'image', datatype: 'FP32', shape: [-1, 1, canvasSize, canvasSize] },
    { name: 'index', datatype: 'INT32', shape: [-1] },
  ],
  outputs: [
    { name: 'boxes', datatype: 'FP32', shape: [-1, 64, 4] },
    { name: 'scores', datatype: 'FP32', shape: [-1, 64] },
    { name: 'class_scores', datatype: 'FP32', shape: [-1, 64, 10] },
  ],
  batched: true,
};

function rowsOf(out: Outputs, inputs: Readonly<Tensors>): Tensors {
  const index = inputs['index']!.data as Int32Array;
  const tensors: Tensors = {};
  for (const name of outputs) {
    const w = widths[name];
    const data = new Float32Array(index.length * w);
    index.forEach((i, r) => data.set(out[name].subarray(i * w, (i + 1) * w), r * w));
    const shape = name === 'scores' ? [index.length, 64] : [index.length, 64, w / 64];
    tensors[name] = { datatype: 'FP32', shape, data } satisfies Tensor;
  }
  return tensors;
}

interface DetectionRow {
  label: string;
  edge: number;
  cloud: number;
  joint: number;
  offload: number;
  shadow: number;
  drifting: boolean;
}

interface DetectionSettings {
  objective: number;
  shadowRate: number;
  length: number;
  /**
   * CrossEntropy (per box, the hardest box's): a fine-grained hardness. IBT's is the share of
   * low-score boxes, a handful of values per image, too coarse for a cut to stand between them:
   * at a 1-point objective it ends up offloading everything.
   */
  miner: 'CrossEntropy' | 'IBT';
}

/** What every condition shares: the task adapter and the scorer of the detector's drift reference. */
interface Detector {
  task: TaskAdapter;
  scorer: OutlierScorer;
}

function openDetector(): Detector {
  const task = createTaskAdapter({ kind: 'detection' }, signature, 0.6);
  const reference = parseDriftReference(
    JSON.parse(readFileSync(new URL('models/detector-edge.drift.json', root), 'utf8')),
  );
  return { task, scorer: createOutlierScorer(reference, signature.inputs[0]!) };
}

async function outputsOf(split: DetectionSplit): Promise<Stream> {
  return {
    split,
    edge: await runModel('detector-edge.onnx', split.images, split.n),
    cloud: await runModel('detector-cloud.onnx', split.images, split.n),
  };
}

/** A condition's canvases: `test` as it is (`p` undefined) or perturbed, boxes moved with it. */
function conditionSplit(
  test: DetectionSplit,
  length: number,
  p: Perturbation | undefined,
): DetectionSplit {
  return passes(test, length, (images, boxes, k) =>
    p === undefined
      ? { images, boxes, n: test.n }
      : {
          images: perturbImages(images, test.n, canvasSize, canvasSize, p, 11 + k),
          boxes: translateBoxes(boxes, canvasSize, canvasSize, p, 11 + k),
          n: test.n,
        },
  );
}

/** The detector pair's joint path over `current`'s model outputs, with the chosen miner. */
function detectionDeps(
  detector: Detector,
  current: { s: Stream },
  window: QualityWindow,
  settings: DetectionSettings,
): JointDeps {
  return replayDeps({
    signature,
    task: detector.task,
    edge: (inputs) => rowsOf(current.s.edge, inputs),
    cloud: (inputs) => rowsOf(current.s.cloud, inputs),
    rowsFrom: 'scores',
    scored: 'image',
    scorer: detector.scorer,
    miner:
      settings.miner === 'IBT'
        ? createMiner('IBT', { thresholdImg: 0.35, thresholdBox: 0.7 })
        : createMiner('CrossEntropy', {}),
    window,
    shadowRate: settings.shadowRate,
    seed: 7,
  });
}

/** `stream` through `deps` in requests of 8 canvases, in order; the window refreshed every 64. */
async function answer(
  deps: JointDeps,
  window: QualityWindow,
  current: { s: Stream },
  stream: Stream,
): Promise<TaskResult[]> {
  current.s = stream;
  const answered: TaskResult[] = [];
  for (let from = 0; from < stream.split.n; from += 8) {
    const rows = Math.min(8, stream.split.n - from);
    const samples = await jointInfer(
      deps,
      {
        image: {
          datatype: 'FP32',
          shape: [rows, 1, canvasSize, canvasSize],
          data: stream.split.images.subarray(from * canvasPixels, (from + rows) * canvasPixels),
        },
        index: {
          datatype: 'INT32',
          shape: [rows],
          data: Int32Array.from({ length: rows }, (_, r) => from + r),
        },
      },
      rows,
    );
    await deps.shadow?.idle();
    answered.push(...samples.map((sample) => sample.result));
    if ((from / 8) % 8 === 7) await window.refresh();
  }
  return answered;
}

/** One model's answers to every canvas, as the task adapter reads them. */
function allResults(task: TaskAdapter, out: Outputs, n: number): TaskResult[] {
  return task.fromModel(
    {
      boxes: { datatype: 'FP32', shape: [n, 64, 4], data: out.boxes },
      scores: { datatype: 'FP32', shape: [n, 64], data: out.scores },
      class_scores: { datatype: 'FP32', shape: [n, 64, 10], data: out.class_scores },
    },
    n,
  );
}

/** One condition streamed after a clean warm-up through a fresh window, shadow and counters. */
async function measureCondition(
  detector: Detector,
  warm: Stream,
  test: DetectionSplit,
  condition: { label: string; kind: Perturbation | undefined },
  settings: DetectionSettings,
): Promise<DetectionRow> {
  const s = await outputsOf(conditionSplit(test, settings.length, condition.kind));
  const current = { s: warm };
  const window = createQualityWindow(
    benchWindowOptions('bench/drift-detection', settings.objective),
  );
  const deps = detectionDeps(detector, current, window, settings);
  await answer(deps, window, current, warm);
  const before = { ...deps.counters };
  const joint = await answer(deps, window, current, s);
  const map = (results: TaskResult[]) =>
    meanAveragePrecision(results.map(scoredBoxes), s.split.boxes).map;
  return {
    label: condition.label,
    edge: map(allResults(detector.task, s.edge, s.split.n)),
    cloud: map(allResults(detector.task, s.cloud, s.split.n)),
    joint: map(joint),
    offload: (deps.counters.hardExampleNumber - before.hardExampleNumber) / s.split.n,
    shadow: (deps.counters.shadowNumber - before.shadowNumber) / s.split.n,
    drifting: window.state().drift?.drifting ?? false,
  };
}

/** Every detection condition, each streamed after a clean warm-up, as the classifier table. */
async function detectionConditions(settings: DetectionSettings): Promise<DetectionRow[]> {
  const data = loadDetectionSet();
  const detector = openDetector();
  const warm = await outputsOf(
    passes(data.validation, settings.length, (images, boxes) => ({
      images,
      boxes,
      n: data.validation.n,
    })),
  );
  const conditions = [
    { label: 'clean', kind: undefined },
    ...detectionSuite.map((p) => ({ label: p.label, kind: p })),
  ];
  const rows: DetectionRow[] = [];
  for (const condition of conditions) {
    rows.push(await measureCondition(detector, warm, data.test, condition, settings));
  }
  return rows;
}

export { detectionConditions };
export type { DetectionRow };
