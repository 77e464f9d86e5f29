/** Greedy per-class NMS and IoU on hand-computed cases. */
import { describe, expect, it } from 'vitest';
import { iou, nonMaxSuppression } from '../../../shared/inference/nms.js';

const options = { iouThreshold: 0.5, maxDetections: 10 };

describe('iou', () => {
  it('is intersection over union', () => {
    // 10x10 boxes offset by 5 in x: intersection 50, union 150.
    expect(iou([0, 0, 10, 10], [5, 0, 15, 10])).toBeCloseTo(1 / 3, 12);
    expect(iou([0, 0, 10, 10], [0, 0, 10, 10])).toBe(1);
    // A 4x4 box inside a 8x8 one: 16 / 64.
    expect(iou([0, 0, 8, 8], [2, 2, 6, 6])).toBe(0.25);
  });

  it('is 0 for boxes that only touch, are apart, or have no area', () => {
    expect(iou([0, 0, 10, 10], [10, 0, 20, 10])).toBe(0);
    expect(iou([0, 0, 10, 10], [30, 30, 40, 40])).toBe(0);
    expect(iou([5, 5, 5, 9], [0, 0, 10, 10])).toBe(0);
    expect(iou([6, 6, 4, 4], [0, 0, 10, 10])).toBe(0);
  });
});

describe('nonMaxSuppression', () => {
  it('keeps the best of overlapping same-class boxes, in descending score order', () => {
    const boxes = [
      [0, 0, 10, 10], // 0: score 0.8
      [1, 0, 11, 10], // 1: IoU with 0 = 90 / 110 = 0.82 -> suppressed by 0
      [20, 20, 30, 30], // 2: apart, kept
      [5, 0, 15, 10], // 3: IoU with 0 = 1/3 -> kept
    ].flat();
    const kept = nonMaxSuppression(boxes, [0.8, 0.7, 0.9, 0.6], [1, 1, 1, 1], options);
    expect(kept).toEqual([2, 0, 3]);
  });

  it('suppresses per class unless class-agnostic', () => {
    const boxes = [0, 0, 10, 10, 1, 0, 11, 10];
    expect(nonMaxSuppression(boxes, [0.9, 0.8], [3, 7], options)).toEqual([0, 1]);
    expect(
      nonMaxSuppression(boxes, [0.9, 0.8], [3, 7], { ...options, classAgnostic: true }),
    ).toEqual([0]);
  });

  it('drops only above the threshold: an IoU equal to it is kept', () => {
    // IoU of [0,0,10,10] and [5,0,15,10] is exactly 1/3 in binary too (50 / 150).
    const boxes = [0, 0, 10, 10, 5, 0, 15, 10];
    expect(
      nonMaxSuppression(boxes, [0.9, 0.8], [0, 0], { ...options, iouThreshold: 50 / 150 }),
    ).toEqual([0, 1]);
    expect(nonMaxSuppression(boxes, [0.9, 0.8], [0, 0], { ...options, iouThreshold: 0.3 })).toEqual(
      [0],
    );
  });

  it('suppression is greedy: a suppressed box suppresses nothing', () => {
    // A suppresses B (IoU 0.6); C overlaps B as much but A only by 1/3, so C stays.
    const a = [0, 0, 10, 10];
    const b = [2.5, 0, 12.5, 10]; // IoU(a, b) = 75 / 125 = 0.6
    const c = [5, 0, 15, 10]; // IoU(b, c) = 0.6, IoU(a, c) = 1/3
    const kept = nonMaxSuppression([...a, ...b, ...c], [0.9, 0.8, 0.7], [0, 0, 0], options);
    expect(kept).toEqual([0, 2]);
  });

  it('breaks score ties by index, skips NaN scores, and stops at maxDetections', () => {
    const boxes = [0, 0, 1, 1, 10, 10, 11, 11, 20, 20, 21, 21, 30, 30, 31, 31];
    expect(nonMaxSuppression(boxes, [0.5, 0.5, Number.NaN, 0.7], [0, 0, 0, 0], options)).toEqual([
      3, 0, 1,
    ]);
    expect(
      nonMaxSuppression(boxes, [0.5, 0.5, 0.6, 0.7], [0, 0, 0, 0], {
        ...options,
        maxDetections: 2,
      }),
    ).toEqual([3, 2]);
  });

  it('accepts typed arrays and no boxes, and rejects mismatched lengths', () => {
    expect(
      nonMaxSuppression(new Float32Array(0), new Float32Array(0), new Int32Array(0), options),
    ).toEqual([]);
    expect(() => nonMaxSuppression([0, 0, 1, 1], [0.5, 0.4], [0, 0], options)).toThrow(
      /4 box values, 2 scores/,
    );
  });
});
