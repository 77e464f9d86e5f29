/**
 * The detection dataset: 64x64 canvases with one to four MNIST digits pasted at random positions
 * and sizes, each labelled with the tight box of its digit and its class. Built from the fixed
 * MNIST split of data.ts, so a test canvas holds only test-split digits and nothing a model was
 * trained or selected on. Seeded: the same seed gives the same canvases on every machine.
 *
 * How a canvas is made (every draw from the split's own seeded stream): each canvas is a scene
 * seen from a distance u = U^2 with U uniform in [0, 1) (0 near, 1 far; half the scenes lie in
 * the nearest quarter), as a camera sees one large object up close and several small ones from
 * afar. That ties difficulty to the canvas, not to each digit alone, as it is in real images, and
 * makes near, easy scenes the common case and far ones the minority:
 * - digits: 1 + floor(V x (1 + 3u)) with V uniform in [0, 1): always one when near, one to four
 *   (equally likely) when farthest;
 * - each digit: the 28x28 sample resized to a side of (32 - 18u) x a factor uniform in
 *   [0.85, 1.15], rounded and kept within [12, 32] pixels (bilinear, half-pixel centres, as
 *   OpenCV's INTER_LINEAR), placed at a uniform position fully inside the canvas, and combined
 *   with what is already there by the maximum (white strokes on black);
 * - a placement is redrawn (up to 50 times, then the digit is left out) when its box overlaps an
 *   earlier one by IoU > 0.2, or when its box centre falls in a grid cell (8x8 pixels) that
 *   already holds a centre: the detectors predict one box per cell, so two centres in a cell
 *   could not both be found. Overlaps up to that IoU, touching and crossing strokes remain;
 * - the box is the tight box of the resized digit's nonzero pixels, in canvas pixels, x2 and y2
 *   exclusive (a one-pixel digit at column 3 is x1 = 3, x2 = 4).
 *
 * Digits are drawn without replacement from a seeded shuffle of their split, reshuffled when it
 * runs out, so every digit appears before any appears twice.
 */
import { loadMnist, pixels } from './data.js';
import type { Split } from './data.js';
import { seededRandom, shuffle } from '../random/index.js';

/** Canvas side in pixels. */
const canvasSize = 64;
/** Pixels per canvas. */
const canvasPixels = canvasSize * canvasSize;
/** The grid the detectors predict on: one box per cell of gridStride x gridStride pixels. */
const gridStride = 8;
const gridSize = canvasSize / gridStride;

const digitSide = 28;
const minSide = 12;
const maxSide = 32;
const nearSide = 32;
const farSide = 14;
const maxOverlap = 0.2;
const placementTries = 50;

/** A ground-truth box: canvas pixels, x2/y2 exclusive, and the digit's class 0-9. */
interface TruthBox {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  cls: number;
}

interface DetectionSplit {
  /** n canvases of 64x64 row-major pixels in [0, 1]. */
  images: Float32Array;
  /** Per canvas, its digits' boxes. */
  boxes: TruthBox[][];
  n: number;
}

interface DetectionSet {
  train: DetectionSplit;
  validation: DetectionSplit;
  test: DetectionSplit;
}

/** How many canvases each split gets, and the seed each split's stream starts from. */
const detectionSplits = {
  train: { canvases: 5000, seed: 20261201 },
  validation: { canvases: 500, seed: 20261202 },
  test: { canvases: 1000, seed: 20261203 },
} as const;

/** Intersection over union of two boxes (xyxy, x2/y2 exclusive). */
function boxIou(a: TruthBox, b: TruthBox): number {
  const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1);
  const h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
  if (w <= 0 || h <= 0) return 0;
  const inter = w * h;
  const union = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter;
  return inter / union;
}

/** The grid cell (row-major index) that holds a box's centre: the cell that must predict it. */
function cellOf(box: TruthBox): number {
  const col = Math.min(gridSize - 1, Math.floor((box.x1 + box.x2) / 2 / gridStride));
  const row = Math.min(gridSize - 1, Math.floor((box.y1 + box.y2) / 2 / gridStride));
  return row * gridSize + col;
}

/** Bilinear resize of one 28x28 digit to side x side (half-pixel centres, edges clamped). */
function resizeDigit(digit: Float32Array, side: number): Float64Array {
  const out = new Float64Array(side * side);
  const scale = digitSide / side;
  const clamp = (v: number) => Math.min(digitSide - 1, Math.max(0, v));
  for (let v = 0; v < side; v += 1) {
    const sy = clamp((v + 0.5) * scale - 0.5);
    const y0 = Math.floor(sy);
    const y1 = Math.min(digitSide - 1, y0 + 1);
    const fy = sy - y0;
    for (let u = 0; u < side; u += 1) {
      const sx = clamp((u + 0.5) * scale - 0.5);
      const x0 = Math.floor(sx);
      const x1 = Math.min(digitSide - 1, x0 + 1);
      const fx = sx - x0;
      const top = digit[y0 * digitSide + x0]! * (1 - fx) + digit[y0 * digitSide + x1]! * fx;
      const bottom = digit[y1 * digitSide + x0]! * (1 - fx) + digit[y1 * digitSide + x1]! * fx;
      out[v * side + u] = top * (1 - fy) + bottom * fy;
    }
  }
  return out;
}

/** The tight box of a resized digit's nonzero pixels, relative to its top-left corner. */
function tightBox(patch: Float64Array, side: number) {
  let x1 = side;
  let y1 = side;
  let x2 = 0;
  let y2 = 0;
  for (let v = 0; v < side; v += 1) {
    for (let u = 0; u < side; u += 1) {
      if (patch[v * side + u]! <= 0) continue;
      x1 = Math.min(x1, u);
      y1 = Math.min(y1, v);
      x2 = Math.max(x2, u + 1);
      y2 = Math.max(y2, v + 1);
    }
  }
  return { x1, y1, x2, y2 };
}

/** Draws digit indices without replacement, reshuffling when the split runs out. */
function digitStream(n: number, uniform: () => number): () => number {
  const order = Array.from({ length: n }, (_, i) => i);
  let next = n;
  return () => {
    if (next === n) {
      shuffle(order, uniform);
      next = 0;
    }
    return order[next++]!;
  };
}

/** How many digits a scene at distance u holds. */
function drawCount(u: number, uniform: () => number): number {
  return 1 + Math.floor(uniform() * (1 + 3 * u));
}

/** A digit's side in a scene at distance u. */
function drawSide(u: number, uniform: () => number): number {
  const nominal = nearSide - (nearSide - farSide) * u;
  const side = Math.round(nominal * (0.85 + 0.3 * uniform()));
  return Math.min(maxSide, Math.max(minSide, side));
}

/**
 * Places one resized digit on `canvas` if a position that keeps the rules exists within the
 * tries; returns its box, or undefined when the digit is left out.
 */
function placeDigit(
  canvas: Float32Array,
  patch: Float64Array,
  side: number,
  cls: number,
  placed: readonly TruthBox[],
  uniform: () => number,
): TruthBox | undefined {
  const tight = tightBox(patch, side);
  if (tight.x2 <= tight.x1) return undefined;
  const taken = new Set(placed.map(cellOf));
  for (let attempt = 0; attempt < placementTries; attempt += 1) {
    const left = Math.floor(uniform() * (canvasSize - side + 1));
    const top = Math.floor(uniform() * (canvasSize - side + 1));
    const box = {
      x1: left + tight.x1,
      y1: top + tight.y1,
      x2: left + tight.x2,
      y2: top + tight.y2,
      cls,
    };
    if (taken.has(cellOf(box)) || placed.some((other) => boxIou(box, other) > maxOverlap)) {
      continue;
    }
    for (let v = 0; v < side; v += 1) {
      for (let u = 0; u < side; u += 1) {
        const at = (top + v) * canvasSize + left + u;
        canvas[at] = Math.max(canvas[at]!, patch[v * side + u]!);
      }
    }
    return box;
  }
  return undefined;
}

/** `count` canvases from the digits of one MNIST split, from `seed`. */
function buildCanvases(digits: Split, count: number, seed: number): DetectionSplit {
  const uniform = seededRandom(seed);
  const nextDigit = digitStream(digits.n, uniform);
  const images = new Float32Array(count * canvasPixels);
  const boxes: TruthBox[][] = [];
  for (let c = 0; c < count; c += 1) {
    const canvas = images.subarray(c * canvasPixels, (c + 1) * canvasPixels);
    const placed: TruthBox[] = [];
    const distance = uniform() ** 2;
    const wanted = drawCount(distance, uniform);
    for (let k = 0; k < wanted; k += 1) {
      const index = nextDigit();
      const side = drawSide(distance, uniform);
      const patch = resizeDigit(digits.x.subarray(index * pixels, (index + 1) * pixels), side);
      const box = placeDigit(canvas, patch, side, digits.y[index]!, placed, uniform);
      if (box !== undefined) placed.push(box);
    }
    boxes.push(placed);
  }
  return { images, boxes, n: count };
}

let cached: DetectionSet | undefined;

/**
 * The training canvases of one epoch: epoch 1 is the train split itself, each later epoch draws
 * as many fresh canvases from the same training digits with its own seed. New positions, sizes
 * and neighbours every epoch keep the larger detector from memorizing 5,000 canvases; the
 * digits, and so the split rule, stay the same.
 */
function trainingCanvases(epoch: number): DetectionSplit {
  const { canvases, seed } = detectionSplits.train;
  if (epoch === 1) return loadDetectionSet().train;
  return buildCanvases(loadMnist().train, canvases, seed + 1000 * (epoch - 1));
}

/** The three splits (built once per process; a few seconds). */
function loadDetectionSet(): DetectionSet {
  if (cached !== undefined) return cached;
  const mnist = loadMnist();
  const build = (name: keyof DetectionSet) =>
    buildCanvases(mnist[name], detectionSplits[name].canvases, detectionSplits[name].seed);
  cached = { train: build('train'), validation: build('validation'), test: build('test') };
  return cached;
}

export {
  loadDetectionSet,
  trainingCanvases,
  buildCanvases,
  boxIou,
  cellOf,
  canvasSize,
  canvasPixels,
  gridStride,
  gridSize,
  detectionSplits,
};
export type { TruthBox, DetectionSplit, DetectionSet };
