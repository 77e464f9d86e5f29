import { describe, expect, it } from 'vitest';
import {
  argmax,
  crossValidate,
  medianSplitGain,
  mostVariedFeature,
  plantEffect,
} from '../../../research/bench/aset-signal/fit.js';
import type { Sample } from '../../../research/bench/aset-signal/fit.js';
import { seededRandom } from '../../../shared/random/index.js';

/**
 * Decisions of `groups` seeds: 4-feature states; gains of 3 candidates, noise of +-`noise`;
 * `perGroup` decisions at windows 0, 1, ... With `clock`, candidate 0 gains 4 points in the
 * even windows (what only the time since the start reveals).
 */
function synthetic(
  groups: number,
  perGroup: number,
  noise: number,
  signal: boolean,
  clock = false,
): Sample[] {
  const uniform = seededRandom(42);
  const out: Sample[] = [];
  for (let group = 0; group < groups; group += 1) {
    for (let i = 0; i < perGroup; i += 1) {
      const state = Float32Array.from({ length: 4 }, () => uniform());
      const n = () => (uniform() - 0.5) * 2 * noise;
      // Candidate 1 is the best on average; candidate 2 wins by 3 points when feature 2 is high.
      const bonus = signal && state[2]! > 0.5 ? 3 : -3;
      const early = clock && i % 2 === 0 ? 4 : 0;
      out.push({
        group,
        window: i,
        state,
        gains: [early + n(), 1 + n(), (signal ? bonus : -3) + n()],
      });
    }
  }
  return out;
}

describe('crossValidate', () => {
  it('finds a gain that only the state reveals, and the state-free chooser cannot', () => {
    const scores = crossValidate(synthetic(6, 60, 0.5, true), { epochs: 30 });
    // State-free: candidate 1 (+1). Reading feature 2: +3 on half, +1 on the other half.
    expect(scores.stateFree).toBeCloseTo(1, 0);
    expect(scores.network).toBeGreaterThan(1.6);
    expect(scores.hindsight).toBeGreaterThanOrEqual(scores.network);
  });

  it('gains nothing from a state that says nothing', () => {
    const scores = crossValidate(synthetic(6, 60, 0.5, false), { epochs: 30 });
    expect(scores.network).toBeCloseTo(scores.stateFree, 0);
    expect(scores.network).toBeLessThan(1.2);
  });

  it('per decision window, finds what the clock alone tells (and the state-free chooser misses)', () => {
    const scores = crossValidate(synthetic(6, 20, 0.5, false, true), { epochs: 5 });
    // Even windows: candidate 0 (+4); odd ones: candidate 1 (+1). One choice for all: about +2.
    expect(scores.perWindow).toBeCloseTo(2.5, 0);
    expect(scores.perWindow).toBeGreaterThan(scores.stateFree + 0.3);
    const none = crossValidate(synthetic(6, 20, 0.5, false), { epochs: 5 });
    expect(none.perWindow).toBeCloseTo(none.stateFree, 0);
  });

  it('needs two seeds to hold one out', () => {
    expect(() => crossValidate(synthetic(1, 10, 0.5, true))).toThrow(RangeError);
  });
});

describe('the planted control', () => {
  const samples = synthetic(4, 40, 0.5, false);

  it('moves one candidate by +-effect on either side of the median of one feature', () => {
    const planted = plantEffect(samples, 0, 3, 2);
    const sorted = samples.map((s) => s.state[3]!).sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    planted.forEach((p, i) => {
      const delta = p.gains[0]! - samples[i]!.gains[0]!;
      expect(delta).toBeCloseTo(samples[i]!.state[3]! > median ? 2 : -2, 10);
      expect(p.gains.slice(1)).toEqual(samples[i]!.gains.slice(1));
    });
    // Knowing the split, candidate 0 (+2 above) beats candidate 1 (+1) on the upper half.
    expect(medianSplitGain(planted, 3)).toBeGreaterThan(medianSplitGain(samples, 3) + 0.3);
  });

  it('picks the feature that varies most', () => {
    const wide = samples.map((s) => ({
      ...s,
      state: Float32Array.from(s.state, (v, f) => (f === 1 ? v * 10 : v)),
    }));
    expect(mostVariedFeature(wide)).toBe(1);
    expect(argmax([0, 3, 3, 1])).toBe(1);
  });
});
