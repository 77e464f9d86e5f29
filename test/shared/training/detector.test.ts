/**
 * The digit detectors: the canvases keep their documented rules, the loss's gradient is exact,
 * the committed ONNX files give the trainer's own decoded outputs, and training is repeatable.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import {
  boxIou,
  buildCanvases,
  canvasPixels,
  canvasSize,
  cellOf,
  detectionSplits,
  loadDetectionSet,
} from '../../../shared/training/detection-data.js';
import { loadMnist } from '../../../shared/training/data.js';
import {
  cells,
  decodeGrid,
  detectionLoss,
  detectionsOf,
  detectorHead,
  edgeDetector,
  evaluateDetector,
  headChannels,
  trainDetector,
} from '../../../shared/training/detector.js';
import { exportDetectorOnnx, importDetectorOnnx } from '../../../shared/training/onnx-export.js';
import { seededRandom } from '../../../shared/random/index.js';

const models = new URL('../../../models/', import.meta.url);

/**
 * The short run's model, as this code wrote it when the committed detectors were trained: a
 * change of data, initialization, loss, schedule or export that alters the bytes shows here.
 * Update it deliberately, together with the committed models.
 */
const PINNED_SMALL_RUN_SHA256 = '280e2ea7a5475f4004dba3afa8ab49ce6867f4317b0b1c4039ed9d3acbc882aa';
const read = (file: string) => new Uint8Array(readFileSync(new URL(file, models)));

describe('detection canvases', () => {
  const data = loadDetectionSet();

  it('have the documented split sizes and keep the placement rules', () => {
    expect([data.train.n, data.validation.n, data.test.n]).toEqual([
      detectionSplits.train.canvases,
      detectionSplits.validation.canvases,
      detectionSplits.test.canvases,
    ]);
    for (const split of [data.train, data.validation, data.test]) {
      expect(split.images.length).toBe(split.n * canvasPixels);
      for (const boxes of split.boxes) {
        expect(boxes.length).toBeGreaterThanOrEqual(1);
        expect(boxes.length).toBeLessThanOrEqual(4);
        expect(new Set(boxes.map(cellOf)).size).toBe(boxes.length);
        boxes.forEach((a, i) => {
          expect(a.x1).toBeGreaterThanOrEqual(0);
          expect(a.y1).toBeGreaterThanOrEqual(0);
          expect(a.x2).toBeLessThanOrEqual(canvasSize);
          expect(a.y2).toBeLessThanOrEqual(canvasSize);
          for (const b of boxes.slice(i + 1)) expect(boxIou(a, b)).toBeLessThanOrEqual(0.2);
        });
      }
    }
  });

  it('give a single digit its tight box: every ink pixel inside, ink on every edge', () => {
    const { test } = data;
    const singles = test.boxes.flatMap((boxes, i) => (boxes.length === 1 ? [i] : []));
    expect(singles.length).toBeGreaterThan(100);
    for (const i of singles.slice(0, 100)) {
      const box = test.boxes[i]![0]!;
      const ink = (x: number, y: number) => test.images[i * canvasPixels + y * canvasSize + x]! > 0;
      const edges = { left: false, right: false, top: false, bottom: false };
      for (let y = 0; y < canvasSize; y += 1) {
        for (let x = 0; x < canvasSize; x += 1) {
          if (!ink(x, y)) continue;
          expect(x >= box.x1 && x < box.x2 && y >= box.y1 && y < box.y2).toBe(true);
          edges.left ||= x === box.x1;
          edges.right ||= x === box.x2 - 1;
          edges.top ||= y === box.y1;
          edges.bottom ||= y === box.y2 - 1;
        }
      }
      expect(edges).toEqual({ left: true, right: true, top: true, bottom: true });
    }
  });

  it('are the same for the same seed and differ for another', () => {
    const digits = loadMnist().validation;
    const a = buildCanvases(digits, 20, 5);
    const b = buildCanvases(digits, 20, 5);
    const c = buildCanvases(digits, 20, 6);
    expect(Buffer.from(a.images.buffer).equals(Buffer.from(b.images.buffer))).toBe(true);
    expect(a.boxes).toEqual(b.boxes);
    expect(Buffer.from(a.images.buffer).equals(Buffer.from(c.images.buffer))).toBe(false);
  });

  it('take a split only from its own digits (a one-class split gives one class)', () => {
    const digits = loadMnist().test;
    const sevens = Array.from({ length: digits.n }, (_, i) => i).filter((i) => digits.y[i] === 7);
    const x = new Float32Array(sevens.length * 784);
    sevens.forEach((i, k) => x.set(digits.x.subarray(i * 784, (i + 1) * 784), k * 784));
    const split = { x, y: new Uint8Array(sevens.length).fill(7), n: sevens.length };
    const canvases = buildCanvases(split, 30, 1);
    expect(new Set(canvases.boxes.flat().map((b) => b.cls))).toEqual(new Set([7]));
  });
});

describe('detectionLoss', () => {
  it('gives the exact gradient of the loss with respect to the raw outputs', () => {
    const truths = loadDetectionSet().validation.boxes.slice(0, 3).flat();
    const uniform = seededRandom(3);
    const raw = Float64Array.from({ length: headChannels * cells }, () => 2 * uniform() - 1);
    const settings = { boxWeight: 5, labelSmoothing: 0.1, neighbourMargin: 0.5 };
    const grad = new Float64Array(raw.length);
    detectionLoss(raw, truths, settings, grad);
    const scratch = new Float64Array(raw.length);
    const h = 1e-6;
    let worst = 0;
    for (let i = 0; i < raw.length; i += 1) {
      const saved = raw[i]!;
      raw[i] = saved + h;
      const up = detectionLoss(raw, truths, settings, scratch);
      raw[i] = saved - h;
      const down = detectionLoss(raw, truths, settings, scratch);
      raw[i] = saved;
      worst = Math.max(worst, Math.abs((up - down) / (2 * h) - grad[i]!));
    }
    expect(worst).toBeLessThan(1e-6);
  });
});

describe('decoding', () => {
  it('turns zero outputs into anchor-sized boxes centred in their cells', () => {
    const grid = decodeGrid(new Float64Array(headChannels * cells));
    // Cell 9 is row 1, column 1: centre (12, 12), 16 x 16.
    expect(Array.from(grid.boxes.subarray(36, 40))).toEqual([4, 4, 20, 20]);
    expect(grid.scores[9]).toBeCloseTo(0.5 * 0.1, 12);
    expect(grid.classScores[9 * 10 + 3]).toBeCloseTo(0.1, 12);
  });

  it('keeps confident boxes and drops those below the score floor', () => {
    const raw = new Float64Array(headChannels * cells).fill(-10);
    raw.fill(0, cells, 5 * cells);
    raw[20] = 10; // objectness of cell 20
    raw[(5 + 4) * cells + 20] = 10; // class 4
    const found = detectionsOf(decodeGrid(raw));
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ cls: 4, x1: 28, y1: 12, x2: 44, y2: 28 });
  });
});

describe.each(['detector-edge', 'detector-cloud'])('%s.onnx', (name) => {
  it('onnxruntime gives the trainer forward pass and decoding (max abs diff <= 1e-4)', async () => {
    const bytes = read(`${name}.onnx`);
    const data = loadDetectionSet();
    const { network, head } = importDetectorOnnx(bytes);
    expect(head).toEqual(detectorHead);
    const n = 64;
    const session = await InferenceSession.create(bytes);
    const images = data.test.images.slice(0, n * canvasPixels);
    const out = await session.run({ image: new Tensor('float32', images, [n, 1, 64, 64]) });
    await session.release();
    expect(out.boxes!.dims).toEqual([n, cells, 4]);
    expect(out.scores!.dims).toEqual([n, cells]);
    expect(out.class_scores!.dims).toEqual([n, cells, 10]);
    let worst = 0;
    const compare = (got: ArrayLike<number>, want: ArrayLike<number>, offset: number) => {
      for (let k = 0; k < want.length; k += 1) {
        worst = Math.max(worst, Math.abs(got[offset + k]! - want[k]!));
      }
    };
    for (let i = 0; i < n; i += 1) {
      const grid = decodeGrid(
        network.logits(images.subarray(i * canvasPixels, (i + 1) * canvasPixels)),
      );
      compare(out.boxes!.data as Float32Array, grid.boxes, i * cells * 4);
      compare(out.scores!.data as Float32Array, grid.scores, i * cells);
      compare(out.class_scores!.data as Float32Array, grid.classScores, i * cells * 10);
    }
    expect(worst).toBeLessThanOrEqual(1e-4);
  });

  it('has the test mAP its summary reports', () => {
    const bytes = read(`${name}.onnx`);
    const data = loadDetectionSet();
    const summary = JSON.parse(readFileSync(new URL(`${name}.json`, models), 'utf8')) as {
      map: { test: number };
      sha256: string;
    };
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(summary.sha256);
    expect(evaluateDetector(importDetectorOnnx(bytes).network, data.test)).toBe(summary.map.test);
  });
});

describe('detector training', () => {
  // The full edge run takes minutes; two epochs on 200 canvases exercise the same code path
  // (seeded init, shuffle, Adam, the rate schedule, best-epoch selection, export).
  it('is repeatable: the same seed and data give the same ONNX bytes, run after run', () => {
    const data = loadDetectionSet();
    const small = {
      train: { ...data.train, n: 200 },
      validation: { ...data.validation, n: 50 },
    };
    const spec = { ...edgeDetector, epochs: 2 };
    const run = () =>
      exportDetectorOnnx(trainDetector(small, spec).network, detectorHead, 'edge', 'test');
    const first = run();
    expect(Buffer.from(run()).equals(Buffer.from(first))).toBe(true);
    expect(createHash('sha256').update(first).digest('hex')).toBe(PINNED_SMALL_RUN_SHA256);
  }, 30_000);
});
