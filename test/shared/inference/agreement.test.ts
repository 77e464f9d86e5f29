/** What the objective charges for an edge answer against the cloud's, on hand-computed cases. */
import { describe, expect, it } from 'vitest';
import { lossAgainstCloud } from '../../../shared/inference/agreement.js';
import type { TaskResult } from '../../../shared/inference/task.js';

const classes = (...p: number[]): TaskResult => ({
  kind: 'classification',
  probabilities: Float32Array.from(p),
});
const box = (x: number, cls: number, score = 0.9) => ({
  box: [x, 0, x + 10, 10] as const,
  score,
  cls,
});
const boxes = (...d: Array<ReturnType<typeof box>>): TaskResult => ({
  kind: 'detection',
  detections: d,
});

describe('lossAgainstCloud', () => {
  it('charges a classification nothing when the top classes agree', () => {
    expect(lossAgainstCloud(classes(0.6, 0.4), classes(0.9, 0.1))).toBe(0);
  });

  it("charges a disagreement the cloud's probability of its class minus that of the edge's", () => {
    // The cloud says class 1 with 0.7 and gives the edge's class 0 0.2: expected loss 0.5.
    expect(lossAgainstCloud(classes(0.8, 0.1, 0.1), classes(0.2, 0.7, 0.1))).toBeCloseTo(0.5, 6);
    // Rows that are not distributions are rescaled first.
    expect(lossAgainstCloud(classes(1, 0), classes(1, 3))).toBeCloseTo(0.5, 6);
  });

  it('charges every disagreement in full when the cloud is not trusted (inputs drifting)', () => {
    expect(lossAgainstCloud(classes(0.8, 0.2), classes(0.45, 0.55), false)).toBe(1);
    expect(lossAgainstCloud(classes(0.8, 0.2), classes(0.9, 0.1), false)).toBe(0);
  });

  it('charges detections the share of confident objects that do not pair up', () => {
    expect(lossAgainstCloud(boxes(), boxes())).toBe(0);
    expect(lossAgainstCloud(boxes(box(0, 1), box(50, 2)), boxes(box(1, 1), box(50, 2)))).toBe(0);
    // One of two objects has another class at the cloud.
    expect(lossAgainstCloud(boxes(box(0, 1), box(50, 2)), boxes(box(0, 1), box(50, 3)))).toBe(0.5);
    // The edge misses one of the cloud's three objects; boxes below 0.5 do not count.
    expect(
      lossAgainstCloud(
        boxes(box(0, 1), box(50, 2), box(100, 3, 0.4)),
        boxes(box(0, 1), box(50, 2), box(100, 3)),
      ),
    ).toBeCloseTo(1 / 3, 12);
    // Overlapping by less than IoU 0.5 is another object.
    expect(lossAgainstCloud(boxes(box(0, 1)), boxes(box(6, 1)))).toBe(1);
  });

  it('has no answer for raw outputs', () => {
    const raw: TaskResult = { kind: 'raw', tensors: {} };
    expect(lossAgainstCloud(raw, raw)).toBeUndefined();
  });
});
