import fc from 'fast-check';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  bandCount,
  bandOf,
  chooseCut,
  cutHardness,
  driftTest,
} from '../../../shared/inference/objective.js';
import { createQualityWindow } from '../../../shared/inference/quality-window.js';

const silent = pino({ level: 'silent' });

describe('bands', () => {
  it('put 0 and tiny hardness in band 0, 1 and NaN in the last, and grow with hardness', () => {
    expect(bandOf(0)).toBe(0);
    expect(bandOf(1e-6)).toBe(0);
    expect(bandOf(1)).toBe(bandCount - 1);
    expect(bandOf(Number.NaN)).toBe(bandCount - 1);
    let last = 0;
    for (let h = 1e-6; h <= 1; h *= 1.1) {
      expect(bandOf(h)).toBeGreaterThanOrEqual(last);
      last = bandOf(h);
    }
  });

  it('offload exactly the hardness above the cut they report', () => {
    for (let cut = 1; cut < bandCount; cut += 1) {
      const edge = cutHardness(cut);
      expect(bandOf(edge * 1.0001)).toBeGreaterThanOrEqual(cut);
      expect(bandOf(edge * 0.9999)).toBeLessThan(cut);
    }
  });
});

const zeros = () => new Array<number>(bandCount).fill(0);

describe('chooseCut', () => {
  it('offloads everything until it has the labels it needs', () => {
    const traffic = zeros();
    traffic[0] = 1000;
    expect(
      chooseCut(
        { traffic, labelled: zeros(), disagree: zeros() },
        { objective: 0.01, z: 1, minLabelled: 10 },
      ),
    ).toMatchObject({ cut: 0, offload: 1 });
  });

  it('answers everything at the edge when no band disagrees, and stops below a band that does', () => {
    const traffic = zeros();
    const labelled = zeros();
    const disagree = zeros();
    for (let b = 0; b < bandCount; b += 1) {
      traffic[b] = 1000;
      labelled[b] = 1000;
    }
    const all = chooseCut(
      { traffic, labelled, disagree },
      { objective: 0.01, z: 1, minLabelled: 1 },
    );
    expect(all.cut).toBe(bandCount);
    expect(all.offload).toBe(0);
    // Band 30 loses 0.9 per input: 1000 / 81000 of traffic x 0.9 = 1.1% on its own.
    disagree[30] = 900;
    const settings = { objective: 0.01, z: 1, minLabelled: 1 };
    const stopped = chooseCut({ traffic, labelled, disagree }, settings, false);
    expect(stopped.cut).toBe(30);
    expect(stopped.upper).toBeLessThanOrEqual(0.01);
    // Monotone, the band is pooled with the harder ones, which would spread its loss past it;
    // the bands' own rates, held to the objective as well, still stop the cut there.
    const pooled = chooseCut({ traffic, labelled, disagree }, settings, true);
    expect(pooled.cut).toBe(30);
    expect(pooled.upper).toBeLessThanOrEqual(0.01);
  });

  it('sees an easy band that is confidently wrong, with the monotone fit or without', () => {
    const traffic = zeros();
    const labelled = zeros();
    const disagree = zeros();
    traffic[0] = 9000;
    labelled[0] = 450; // shadow labels: 5%
    disagree[0] = 9; // 2% of the easiest inputs lose: 1.8 points on their own
    traffic[60] = 1000;
    labelled[60] = 1000;
    disagree[60] = 0;
    const settings = { objective: 0.01, z: 1, minLabelled: 1 };
    expect(chooseCut({ traffic, labelled, disagree }, settings, false).cut).toBe(0);
    // The monotone fit alone pools band 0 with the well-labelled band 60 (9 / 1450 x 0.9 =
    // 0.56%) and would answer it at the edge; its own rate (1.8%) keeps it offloaded.
    expect(chooseCut({ traffic, labelled, disagree }, settings, true).cut).toBe(0);
  });

  it('holds a thinly labelled band against the objective pessimistically', () => {
    const traffic = zeros();
    const labelled = zeros();
    const disagree = zeros();
    traffic[0] = 10_000;
    labelled[0] = 2; // two shadow labels, both agreeing
    traffic[40] = 100;
    labelled[40] = 100;
    disagree[40] = 60;
    const estimate = chooseCut(
      { traffic, labelled, disagree },
      { objective: 0.01, z: 1, minLabelled: 1 },
    );
    // Band 0 borrows the harder bands' 60% rate: far from trusted with two labels.
    expect(estimate.cut).toBe(0);
  });
});

describe('driftTest', () => {
  const settings = { expectedShare: 0.05, raiseAt: 5, clearAt: 2, minInputs: 100 };

  it('raises on a share well above the reference, clears with hysteresis, ignores small windows', () => {
    expect(driftTest(50, 1000, settings, false)).toMatchObject({ drifting: false, score: 0 });
    const raised = driftTest(200, 1000, settings, false);
    expect(raised.drifting).toBe(true);
    expect(raised.score).toBeCloseTo((0.2 - 0.05) / Math.sqrt((0.05 * 0.95) / 1000), 6);
    // z = 3.6: not enough to raise, too much to clear.
    expect(driftTest(75, 1000, settings, false).drifting).toBe(false);
    expect(driftTest(75, 1000, settings, true).drifting).toBe(true);
    expect(driftTest(55, 1000, settings, true).drifting).toBe(false);
    expect(driftTest(90, 90, settings, false).drifting).toBe(false);
  });
});

/**
 * The controller on a synthetic stream with known disagreement rates per band, which change at a
 * random point. Its stated guarantee: once its window (buckets x bucketSize inputs) has passed
 * since the last change, the true loss of the cut it holds is never above the objective by more
 * than half the objective.
 */
describe('the objective on synthetic streams', () => {
  const regime = fc.record({
    /** Traffic weights per band: most traffic easy, as a confident model's. */
    traffic: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), {
      minLength: bandCount,
      maxLength: bandCount,
    }),
    /** Disagreement rate at the easiest band and at the hardest. */
    easyRate: fc.double({ min: 0, max: 0.3, noNaN: true }),
    hardRate: fc.double({ min: 0, max: 0.9, noNaN: true }),
  });

  it('never holds a cut whose true loss exceeds the objective by more than its margin for longer than its window', async () => {
    await fc.assert(
      fc.asyncProperty(
        regime,
        regime,
        fc.double({ min: 0.005, max: 0.05, noNaN: true }),
        fc.integer({ min: 2_000, max: 15_000 }),
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        async (before, after, objective, switchAt, seed) => {
          let state = seed;
          const random = () => {
            state = (Math.imul(state, 1103515245) + 12345) >>> 0;
            return state / 2 ** 32;
          };
          const bucketSize = 250;
          const buckets = 20;
          const window = bucketSize * buckets;
          const quality = createQualityWindow({
            redis: undefined,
            service: 'test/objective',
            reporter: 'test',
            bucketSize,
            buckets,
            driftWindow: 1000,
            refreshMs: 0,
            calibration: { objective, z: 1, minLabelled: 200 },
            drift: undefined,
            log: silent,
          });
          const shapes = [before, after].map((r) => {
            // Skewed towards easy bands; rates rise from easyRate to hardRate with hardness.
            const w = r.traffic.map((v, b) => v * 0.85 ** b + 1e-3);
            const total = w.reduce((a, b) => a + b, 0);
            const p = w.map((v) => v / total);
            const rate = p.map(
              (_, b) => r.easyRate + ((r.hardRate - r.easyRate) * b) / (bandCount - 1),
            );
            return { p, rate };
          });
          const shadowRate = 0.1;
          const total = switchAt + 3 * window;
          let violationsAfterWindow = 0;
          for (let t = 0; t < total; t += 1) {
            const shape = shapes[t < switchAt ? 0 : 1]!;
            let u = random();
            let band = 0;
            while (band < bandCount - 1 && u > shape.p[band]!) {
              u -= shape.p[band]!;
              band += 1;
            }
            quality.observe(band, undefined);
            const hard = quality.isHard(band === 0 ? 0 : cutHardness(band) * 1.0001) ?? true;
            if (hard || random() < shadowRate)
              quality.label(band, random() < shape.rate[band]! ? 1 : 0);
            if (t % 200 === 199) {
              await quality.refresh();
              const cut = quality.state().estimate!.cut;
              let trueLoss = 0;
              for (let b = 0; b < cut; b += 1) trueLoss += shape.p[b]! * shape.rate[b]!;
              const settled = (t >= window && t < switchAt) || t >= switchAt + window;
              if (settled && trueLoss > objective * 1.5) violationsAfterWindow += 1;
            }
          }
          expect(violationsAfterWindow).toBe(0);
        },
      ),
      { numRuns: 25, seed: 20261124 },
    );
  }, 60_000);
});
