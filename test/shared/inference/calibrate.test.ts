/** Calibration: sweeping a miner's parameter on labelled outcomes and picking for a target. */
import { describe, expect, it } from 'vitest';
import { outcomes, pick, sweep } from '../../../shared/inference/calibrate.js';

describe('calibration', () => {
  // Four samples, two classes: the edge errs on sample 1 (the cloud fixes it) and the cloud
  // on sample 2 (which the edge gets right, unsure); by edge confidence: 2, 1, 3, 0.
  const labels = Uint8Array.from([0, 0, 1, 1]);
  const edge = Float32Array.from([0.99, 0.01, 0.4, 0.6, 0.45, 0.55, 0.3, 0.7]);
  const cloud = Float32Array.from([0.9, 0.1, 0.9, 0.1, 0.9, 0.1, 0.1, 0.9]);
  const o = outcomes(labels, edge, cloud, 2);

  it('scores every distinct decision of the real miner', () => {
    expect([o.edgeCorrect, o.cloudCorrect, o.fixable, o.breakable]).toEqual([3, 3, 1, 1]);
    const points = sweep('Threshold', 'threshold', o);
    expect(points.map((p) => p.hard)).toEqual([0, 1, 2, 3, 4]);
    expect(points.map((p) => p.correct)).toEqual([3, 2, 3, 3, 3]);
  });

  it('picks the most offload within a budget, or the least reaching an accuracy', () => {
    const points = sweep('Threshold', 'threshold', o);
    expect(pick(points, o.n, { maxOffload: 0.5 })?.hard).toBe(2);
    expect(pick(points, o.n, { minAccuracy: 0.75 })?.hard).toBe(0);
    expect(pick(points, o.n, { minAccuracy: 1 })).toBeUndefined();
  });
});
