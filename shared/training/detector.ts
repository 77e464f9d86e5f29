/**
 * The digit detectors: a single-scale grid detector (YOLO-v1-like, one box per 8x8-pixel cell of
 * the 64x64 canvas), its loss, its decoding and its training. The network is an ordinary
 * sequential Network ending in a 1x1 convolution with 15 channels per cell: objectness, the box
 * centre's offset from the cell (2 sigmoid - 0.5 cells each way), the box's log width and height
 * relative to an anchor, and 10 class logits. Decoding here is exactly what the ONNX graph does
 * (onnx-export.ts, exportDetectorOnnx), so the trainer's figures are the served model's.
 *
 * Box confidence is sigmoid(objectness) x the top class probability: low when the detector is
 * unsure there is a digit or unsure which digit it is, which is what the IBT miner reads.
 */
import type { DetectionSplit, TruthBox } from './detection-data.js';
import { canvasPixels, canvasSize, cellOf, gridSize, gridStride } from './detection-data.js';
import type { ScoredBox } from './detection-metrics.js';
import { meanAveragePrecision } from './detection-metrics.js';
import { Adam, Network } from './network.js';
import type { LayerSpec } from './network.js';
import { seededRandom, shuffle } from '../random/index.js';
import { nonMaxSuppression } from '../inference/nms.js';
import type { NmsOptions } from '../inference/nms.js';

const classes = 10;
const cells = gridSize * gridSize;
/** Per cell: objectness, tx, ty, tw, th, then the class logits. */
const headChannels = 5 + classes;

/** The fixed decoding constants the ONNX graph bakes in. */
interface DetectorHead {
  /** Width and height (pixels) of a box whose tw, th are 0. */
  anchor: number;
  /** Pixels per grid cell. */
  stride: number;
  /** Cells per side. */
  grid: number;
  classes: number;
}

/** A box of 16 pixels is the middle of the digits' sizes (10 to 23 pixels tight). */
const detectorHead: DetectorHead = { anchor: 16, stride: gridStride, grid: gridSize, classes };

interface LossSettings {
  /** Weight of the squared errors of the centre offset (in cells) and log size. */
  boxWeight: number;
  /** Class targets are (1 - e) one-hot + e / 10: keeps class probabilities from saturating. */
  labelSmoothing: number;
  /**
   * Also train a cell next to the centre cell to predict the box when the centre lies within this
   * many cells of their shared border (0: never; 0.5: always, as YOLOv5). A digit near a border
   * then gets agreeing boxes from both cells, which NMS merges, instead of a confident box and a
   * neighbour taught "no digit" for almost the same view; a digit well inside its cell keeps one
   * positive, so neighbours that see it off-centre do not learn to guess its class.
   */
  neighbourMargin: number;
}

interface DetectorSpec {
  name: string;
  layers: readonly LayerSpec[];
  epochs: number;
  batch: number;
  /** Adam's learning rate at the first epoch, decayed on a cosine to `finalRate` at the last. */
  rate: number;
  finalRate: number;
  seed: number;
  loss: LossSettings;
}

const conv = (outChannels: number): LayerSpec[] => [
  { type: 'conv3x3', outChannels },
  { type: 'relu' },
];
const maxpool: LayerSpec = { type: 'maxpool2' };
const head: LayerSpec = { type: 'conv1x1', outChannels: headChannels };

/**
 * Small and fast (under 0.5M multiply-adds): the canvas averaged down to 32x32, three 3x3 conv
 * stages (6, 12, 24 channels) down to the 8x8 grid, and a two-layer 1x1 head (32 hidden units),
 * so the class of a digit is a nonlinear function of its cell's features.
 */
const edgeDetector: DetectorSpec = {
  name: 'detector-edge',
  layers: [
    { type: 'avgpool2' },
    ...conv(6),
    maxpool,
    ...conv(12),
    maxpool,
    ...conv(24),
    { type: 'conv1x1', outChannels: 32 },
    { type: 'relu' },
    head,
  ],
  epochs: 100,
  batch: 16,
  rate: 0.005,
  finalRate: 0.00025,
  seed: 20261124,
  loss: { boxWeight: 5, labelSmoothing: 0, neighbourMargin: 0.5 },
};

/**
 * Clearly more accurate: full resolution, three conv + max-pool stages (8, 16, 32 channels), two
 * 64-channel 3x3 convs on the grid (a receptive field of 54 pixels, wider than any digit), the head.
 */
const cloudDetector: DetectorSpec = {
  name: 'detector-cloud',
  layers: [
    ...conv(8),
    maxpool,
    ...conv(16),
    maxpool,
    ...conv(32),
    maxpool,
    ...conv(64),
    ...conv(64),
    head,
  ],
  epochs: 18,
  batch: 16,
  rate: 0.003,
  finalRate: 0.00015,
  seed: 20261125,
  loss: { boxWeight: 5, labelSmoothing: 0, neighbourMargin: 0.5 },
};

/** How the model card and the benchmarks turn the 64 boxes into detections. */
const evaluationSettings = { scoreFloor: 0.05, iouThreshold: 0.6, maxDetections: 20 } as const;

/** All 64 cells' boxes as the ONNX outputs give them (one image). */
interface DecodedGrid {
  /** 64 x 4: x1, y1, x2, y2 in input pixels. */
  boxes: Float64Array;
  /** 64: sigmoid(objectness) x top class probability. */
  scores: Float64Array;
  /** 64 x 10: per-box softmax class distribution. */
  classScores: Float64Array;
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
/** log(1 + e^z) without overflow: the BCE-with-logits term. */
const softplus = (z: number) => (z > 0 ? z + Math.log1p(Math.exp(-z)) : Math.log1p(Math.exp(z)));
/** The raw output of channel c at cell k (the last layer is [channels, 8, 8], row-major). */
const at = (c: number, k: number) => c * cells + k;

function emptyGrid(): DecodedGrid {
  return {
    boxes: new Float64Array(cells * 4),
    scores: new Float64Array(cells),
    classScores: new Float64Array(cells * classes),
  };
}

/** Softmax of cell k's class logits into `out` (10 values from `offset`); returns the maximum. */
function classSoftmax(raw: ArrayLike<number>, k: number, out: Float64Array, offset: number) {
  let max = -Infinity;
  for (let c = 0; c < classes; c += 1) max = Math.max(max, raw[at(5 + c, k)]!);
  let sum = 0;
  for (let c = 0; c < classes; c += 1) sum += out[offset + c] = Math.exp(raw[at(5 + c, k)]! - max);
  let top = 0;
  for (let c = 0; c < classes; c += 1) top = Math.max(top, (out[offset + c]! /= sum));
  return top;
}

/** The network's raw outputs for one image as boxes, scores and class distributions. */
function decodeGrid(raw: ArrayLike<number>, out: DecodedGrid = emptyGrid()): DecodedGrid {
  const { anchor, stride } = detectorHead;
  for (let k = 0; k < cells; k += 1) {
    const col = k % gridSize;
    const row = Math.floor(k / gridSize);
    const cx = (col + (2 * sigmoid(raw[at(1, k)]!) - 0.5)) * stride;
    const cy = (row + (2 * sigmoid(raw[at(2, k)]!) - 0.5)) * stride;
    const halfW = Math.exp(raw[at(3, k)]!) * (anchor / 2);
    const halfH = Math.exp(raw[at(4, k)]!) * (anchor / 2);
    out.boxes[4 * k] = cx - halfW;
    out.boxes[4 * k + 1] = cy - halfH;
    out.boxes[4 * k + 2] = cx + halfW;
    out.boxes[4 * k + 3] = cy + halfH;
    const top = classSoftmax(raw, k, out.classScores, k * classes);
    out.scores[k] = sigmoid(raw[at(0, k)]!) * top;
  }
  return out;
}

/**
 * The boxes a caller keeps from one decoded grid: score at least the floor, per-class NMS, at
 * most `maxDetections`, highest score first. A box's class is its top class.
 */
function detectionsOf(
  grid: DecodedGrid,
  settings: NmsOptions & { scoreFloor: number } = evaluationSettings,
): ScoredBox[] {
  const kept: number[] = [];
  for (let k = 0; k < cells; k += 1) if (grid.scores[k]! >= settings.scoreFloor) kept.push(k);
  const labels = kept.map((k) => {
    let best = 0;
    for (let c = 1; c < classes; c += 1) {
      if (grid.classScores[k * classes + c]! > grid.classScores[k * classes + best]!) best = c;
    }
    return best;
  });
  const boxes = kept.flatMap((k) => Array.from(grid.boxes.subarray(4 * k, 4 * k + 4)));
  const scores = kept.map((k) => grid.scores[k]!);
  const survivors = nonMaxSuppression(boxes, scores, labels, settings);
  return survivors.map((i) => ({
    x1: boxes[4 * i]!,
    y1: boxes[4 * i + 1]!,
    x2: boxes[4 * i + 2]!,
    y2: boxes[4 * i + 3]!,
    score: scores[i]!,
    cls: labels[i]!,
  }));
}

/**
 * The loss of one image's raw outputs against its ground truth, and its gradient with respect to
 * those outputs written into `grad` (same length as `raw`):
 * - objectness: binary cross-entropy on every cell, 1 for the positive cells (the cell holding a
 *   box centre and the neighbours `assignCells` adds), else 0;
 * - on the positive cells only: `boxWeight` x squared error of the centre offset (after the
 *   sigmoid) and of log(size / anchor), and cross-entropy of the (smoothed) class target.
 */
function detectionLoss(
  raw: ArrayLike<number>,
  truths: readonly TruthBox[],
  settings: LossSettings,
  grad: Float64Array,
): number {
  grad.fill(0);
  const owner = assignCells(truths, settings.neighbourMargin);
  let loss = 0;
  for (let k = 0; k < cells; k += 1) {
    const z = raw[at(0, k)]!;
    const target = owner.has(k) ? 1 : 0;
    loss += softplus(z) - target * z;
    grad[at(0, k)] = sigmoid(z) - target;
  }
  for (const [k, truth] of owner) loss += positiveLoss(raw, k, truth, settings, grad);
  return loss;
}

/**
 * Which ground-truth box each positive cell predicts. Centre cells first (the data puts at most
 * one centre in a cell); then each neighbour within `margin` of the centre (see LossSettings),
 * a contested one going to the box whose centre is nearest to it.
 */
function assignCells(truths: readonly TruthBox[], margin: number): Map<number, TruthBox> {
  const owner = new Map<number, TruthBox>();
  for (const truth of truths) owner.set(cellOf(truth), truth);
  const claims = new Map<number, { truth: TruthBox; distance: number }>();
  for (const truth of truths) {
    for (const { k, distance } of neighbourCells(truth, margin)) {
      const claim = claims.get(k);
      if (!owner.has(k) && (claim === undefined || distance < claim.distance)) {
        claims.set(k, { truth, distance });
      }
    }
  }
  for (const [k, { truth }] of claims) owner.set(k, truth);
  return owner;
}

/**
 * The horizontal and vertical neighbours of a box's centre cell that the centre lies within
 * `margin` of, inside the grid, with the centre's distance to each one's middle (in cells).
 */
function neighbourCells(truth: TruthBox, margin: number): Array<{ k: number; distance: number }> {
  const gx = (truth.x1 + truth.x2) / 2 / gridStride;
  const gy = (truth.y1 + truth.y2) / 2 / gridStride;
  const col = Math.min(gridSize - 1, Math.floor(gx));
  const row = Math.min(gridSize - 1, Math.floor(gy));
  const fx = gx - col;
  const fy = gy - row;
  const candidates: Array<[number, number]> = [];
  if (Math.min(fx, 1 - fx) < margin) candidates.push([fx < 0.5 ? col - 1 : col + 1, row]);
  if (Math.min(fy, 1 - fy) < margin) candidates.push([col, fy < 0.5 ? row - 1 : row + 1]);
  return candidates
    .filter(([c, r]) => c >= 0 && r >= 0 && c < gridSize && r < gridSize)
    .map(([c, r]) => ({
      k: r * gridSize + c,
      distance: Math.hypot(gx - (c + 0.5), gy - (r + 0.5)),
    }));
}

/** The box and class terms of one positive cell k (adds to `grad`). */
function positiveLoss(
  raw: ArrayLike<number>,
  k: number,
  truth: TruthBox,
  settings: LossSettings,
  grad: Float64Array,
): number {
  const { anchor, stride } = detectorHead;
  const w = settings.boxWeight;
  const offsets = [
    (truth.x1 + truth.x2) / 2 / stride - (k % gridSize),
    (truth.y1 + truth.y2) / 2 / stride - Math.floor(k / gridSize),
  ];
  let loss = 0;
  // The offset 2 sigmoid(t) - 0.5 spans [-0.5, 1.5] cells, so a neighbour cell can reach a
  // centre half a cell beyond its border.
  offsets.forEach((target, d) => {
    const s = sigmoid(raw[at(1 + d, k)]!);
    const error = 2 * s - 0.5 - target;
    loss += w * error ** 2;
    grad[at(1 + d, k)] = 4 * w * error * s * (1 - s);
  });
  [truth.x2 - truth.x1, truth.y2 - truth.y1].forEach((size, d) => {
    const error = raw[at(3 + d, k)]! - Math.log(size / anchor);
    loss += w * error ** 2;
    grad[at(3 + d, k)] = 2 * w * error;
  });
  const p = new Float64Array(classes);
  classSoftmax(raw, k, p, 0);
  const e = settings.labelSmoothing;
  for (let c = 0; c < classes; c += 1) {
    const q = (c === truth.cls ? 1 - e : 0) + e / classes;
    loss -= q * Math.log(Math.max(p[c]!, 1e-300));
    grad[at(5 + c, k)] = p[c]! - q;
  }
  return loss;
}

/** A new detector network for `spec`, initialized from its seed's stream. */
function createDetector(spec: DetectorSpec, uniform: () => number): Network {
  const network = new Network([1, canvasSize, canvasSize], spec.layers);
  if (network.outputSize !== headChannels * cells) {
    throw new Error(`${spec.name}: the layers give ${network.outputSize} outputs, not 15 x 64`);
  }
  network.initialize(uniform);
  // Start objectness at the share of cells that hold a box (~2.5 in 64), not at 0.5: otherwise
  // the first steps are spent pushing 60 background cells down.
  const head = network.layers.at(-1)!.params[1]!;
  head.value[0] = Math.log(2.5 / (cells - 2.5));
  return network;
}

/** Decoded detections for every image of a split. */
function detectSplit(network: Network, split: DetectionSplit): ScoredBox[][] {
  const grid = emptyGrid();
  const out: ScoredBox[][] = [];
  for (let i = 0; i < split.n; i += 1) {
    const raw = network.logits(split.images.subarray(i * canvasPixels, (i + 1) * canvasPixels));
    out.push(detectionsOf(decodeGrid(raw, grid)));
  }
  return out;
}

/** mAP@0.5 of `network` on a split, with the evaluation settings. */
function evaluateDetector(network: Network, split: DetectionSplit): number {
  return meanAveragePrecision(detectSplit(network, split), split.boxes.slice(0, split.n), 0.5).map;
}

interface DetectorEpoch {
  epoch: number;
  loss: number;
  rate: number;
  validationMap: number;
  seconds: number;
}

/** One pass over the training canvases in a seeded order; returns the mean loss per image. */
function trainEpoch(
  network: Network,
  optimizer: Adam,
  split: DetectionSplit,
  order: number[],
  spec: DetectorSpec,
): number {
  const grad = new Float64Array(network.outputSize);
  let loss = 0;
  for (let start = 0; start < order.length; start += spec.batch) {
    const end = Math.min(order.length, start + spec.batch);
    network.zeroGrad();
    for (let b = start; b < end; b += 1) {
      const i = order[b]!;
      const raw = network.logits(split.images.subarray(i * canvasPixels, (i + 1) * canvasPixels));
      loss += detectionLoss(raw, split.boxes[i]!, spec.loss, grad);
      network.backpropagate(grad);
    }
    optimizer.step(end - start);
  }
  return loss / order.length;
}

/** Cosine decay from `rate` (epoch 1) to `finalRate` (the last epoch). */
function rateAt(spec: DetectorSpec, epoch: number): number {
  const progress = spec.epochs === 1 ? 1 : (epoch - 1) / (spec.epochs - 1);
  return spec.finalRate + ((spec.rate - spec.finalRate) * (1 + Math.cos(Math.PI * progress))) / 2;
}

/**
 * Trains a detector with a fixed seed (same data and spec, same weights) and keeps the weights
 * of the epoch with the best validation mAP@0.5.
 */
function trainDetector(
  data: { train: DetectionSplit | ((epoch: number) => DetectionSplit); validation: DetectionSplit },
  spec: DetectorSpec,
  onEpoch?: (report: DetectorEpoch) => void,
): { network: Network; history: DetectorEpoch[]; bestEpoch: number } {
  const uniform = seededRandom(spec.seed);
  const network = createDetector(spec, uniform);
  const optimizer = new Adam(network.params, spec.rate);
  const history: DetectorEpoch[] = [];
  let best = { map: -1, epoch: 0, weights: network.getParameters() };
  for (let epoch = 1; epoch <= spec.epochs; epoch += 1) {
    const started = performance.now();
    const train = typeof data.train === 'function' ? data.train(epoch) : data.train;
    const rate = rateAt(spec, epoch);
    optimizer.setRate(rate);
    const order = shuffle(
      Array.from({ length: train.n }, (_, i) => i),
      uniform,
    );
    const loss = trainEpoch(network, optimizer, train, order, spec);
    const validationMap = evaluateDetector(network, data.validation);
    const report = {
      epoch,
      loss,
      rate,
      validationMap,
      seconds: (performance.now() - started) / 1000,
    };
    history.push(report);
    onEpoch?.(report);
    if (validationMap > best.map)
      best = { map: validationMap, epoch, weights: network.getParameters() };
  }
  network.setParameters(best.weights);
  return { network, history, bestEpoch: best.epoch };
}

export {
  edgeDetector,
  cloudDetector,
  trainDetector,
  evaluateDetector,
  detectionsOf,
  decodeGrid,
  detectionLoss,
  detectorHead,
  evaluationSettings,
  headChannels,
  cells,
};
export type { DetectorSpec, DetectorHead, DetectorEpoch, DecodedGrid, LossSettings };
