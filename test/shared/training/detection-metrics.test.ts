/** VOC all-point mAP on cases small enough to compute by hand. */
import { describe, expect, it } from 'vitest';
import { meanAveragePrecision } from '../../../shared/training/detection-metrics.js';

const box = (x1: number, cls: number) => ({ x1, y1: 0, x2: x1 + 10, y2: 10, cls });
const hit = (x1: number, cls: number, score: number) => ({ ...box(x1, cls), score });

describe('meanAveragePrecision', () => {
  it('is 1 for perfect detections', () => {
    const truths = [[box(0, 0), box(20, 1)], [box(5, 0)]];
    const predictions = [[hit(0, 0, 0.9), hit(20, 1, 0.8)], [hit(5, 0, 0.7)]];
    expect(meanAveragePrecision(predictions, truths)).toEqual({ map: 1, perClass: [1, 1] });
  });

  it('a false positive ranked first costs precision at every recall: AP 2/3', () => {
    // Ranked: FP, TP, TP. Precision 0, 1/2, 2/3 at recall 0, 1/2, 1; made monotone: 2/3 and 2/3.
    const truths = [[box(0, 0)], [box(0, 0)]];
    const predictions = [[hit(0, 0, 0.8), hit(40, 0, 0.9)], [hit(0, 0, 0.7)]];
    expect(meanAveragePrecision(predictions, truths).map).toBeCloseTo(2 / 3, 12);
  });

  it('a missed ground truth caps recall: AP 1/2', () => {
    const truths = [[box(0, 0)], [box(0, 0)]];
    expect(meanAveragePrecision([[hit(0, 0, 0.9)], []], truths).map).toBe(0.5);
  });

  it('a second detection of a matched box is a false positive: AP 5/6', () => {
    // Ranked: TP (image 0), duplicate (image 0), TP (image 1): precision 1, 1/2, 2/3 at recall
    // 1/2, 1/2, 1. Monotone: 1 up to recall 1/2, then 2/3: AP = 1/2 + 1/3.
    const truths = [[box(0, 0)], [box(0, 0)]];
    const predictions = [[hit(0, 0, 0.9), hit(1, 0, 0.8)], [hit(0, 0, 0.7)]];
    expect(meanAveragePrecision(predictions, truths).map).toBeCloseTo(5 / 6, 12);
  });

  it('matches at IoU >= the threshold, and only within the class', () => {
    // Shifted by 5 of 10: IoU 1/3.
    const truths = [[box(0, 0)]];
    expect(meanAveragePrecision([[hit(5, 0, 0.9)]], truths).map).toBe(0);
    expect(meanAveragePrecision([[hit(5, 0, 0.9)]], truths, 1 / 3).map).toBe(1);
    expect(meanAveragePrecision([[hit(0, 1, 0.9)]], truths).map).toBe(0);
  });

  it('averages over the classes that have ground truth only', () => {
    // Class 0 perfect, class 1 half found, class 2 has detections but no ground truth.
    const truths = [[box(0, 0), box(20, 1)], [box(20, 1)]];
    const predictions = [[hit(0, 0, 0.9), hit(20, 1, 0.8), hit(40, 2, 0.99)], []];
    const result = meanAveragePrecision(predictions, truths);
    expect(result.perClass).toEqual([1, 0.5, Number.NaN]);
    expect(result.map).toBe(0.75);
  });

  it('does not depend on the order detections are listed in', () => {
    const truths = [[box(0, 0), box(30, 0)], [box(0, 0)]];
    const a = [[hit(0, 0, 0.5), hit(30, 0, 0.9), hit(60, 0, 0.7)], [hit(0, 0, 0.6)]];
    const b = [[hit(60, 0, 0.7), hit(30, 0, 0.9), hit(0, 0, 0.5)], [hit(0, 0, 0.6)]];
    expect(meanAveragePrecision(a, truths)).toEqual(meanAveragePrecision(b, truths));
  });

  it('rejects lists of different lengths', () => {
    expect(() => meanAveragePrecision([[]], [])).toThrow(/1 prediction lists for 0 images/);
  });
});
