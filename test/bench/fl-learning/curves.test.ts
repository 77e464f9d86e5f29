/**
 * bench/fl-learning's reading of a learning curve: rounds to the target (the first evaluated round
 * at or above it), accuracy at a budget, and the speed-up, a lower bound when FedSGD never reached
 * the target and undefined when FedAvg did not.
 */
import { describe, expect, it } from 'vitest';
import {
  accuracyAt,
  bestAccuracy,
  describeSpeedup,
  reach,
  roundsToTarget,
  speedup,
} from '../../../bench/fl-learning/curves.js';

const curve = [0.1, 0.5, 0.8, 0.79, 0.9, 0.85].map((accuracy, round) => ({
  round: round * 2,
  accuracy,
  loss: 1 - accuracy,
}));

describe('learning curves', () => {
  it('finds the first evaluated round at or above the target', () => {
    expect(roundsToTarget(curve, 0.8)).toBe(4);
    expect(roundsToTarget(curve, 0.9)).toBe(8);
    expect(roundsToTarget(curve, 0.95)).toBeUndefined();
  });

  it('reads the accuracy of the last point at or before a round', () => {
    expect(accuracyAt(curve, 4)).toBe(0.8);
    expect(accuracyAt(curve, 5)).toBe(0.8);
    expect(accuracyAt(curve, 100)).toBe(0.85);
    expect(accuracyAt([], 3)).toBeUndefined();
    expect(bestAccuracy(curve)).toBe(0.9);
  });

  it('says whether and when a run reached the target', () => {
    expect(reach(curve, 0.9, 10)).toEqual({ kind: 'reached', rounds: 8 });
    expect(reach(curve, 0.95, 10)).toEqual({ kind: 'not-reached', rounds: 10, best: 0.9 });
  });

  it('divides FedSGD rounds by FedAvg rounds, exact, as a lower bound, or undefined', () => {
    const fedavg = { kind: 'reached', rounds: 20 } as const;
    expect(speedup({ kind: 'reached', rounds: 300 }, fedavg)).toEqual({ kind: 'exact', value: 15 });
    const capped = speedup({ kind: 'not-reached', rounds: 1000, best: 0.9 }, fedavg);
    expect(capped).toEqual({ kind: 'lower-bound', value: 50 });
    expect(describeSpeedup(capped).note).toMatch(/lower bound/);
    const none = speedup(fedavg, { kind: 'not-reached', rounds: 300, best: 0.5 });
    expect(none).toEqual({ kind: 'undefined' });
    expect(describeSpeedup(none).value).toBe(0);
  });
});
