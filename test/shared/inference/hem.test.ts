/**
 * Hard-example mining: Sedna's semantics at each boundary, the Sedna failure cases with our fixed
 * behaviour, the seeded Random stream, and properties (hardness in [0, 1], isHard a step function
 * of hardness, agreement with Sedna's raw comparisons away from ties).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hemNames } from '../../../shared/crds/index.js';
import type { HemName } from '../../../shared/crds/index.js';
import { ValidationError } from '../../../shared/errors/index.js';
import {
  createMiner,
  defaultParameters,
  parseHemParameters,
} from '../../../shared/inference/hem.js';
import type { EdgeOutput, HardExampleMiner, HemParameters } from '../../../shared/inference/hem.js';

const cls = (...probabilities: number[]): EdgeOutput => ({ kind: 'classification', probabilities });
const det = (...scores: number[]): EdgeOutput => ({
  kind: 'detection',
  boxes: scores.map((score) => ({ score })),
});

/** Expects a ValidationError whose message matches every pattern. */
function expectValidation(run: () => unknown, ...patterns: (string | RegExp)[]): void {
  let caught: unknown;
  try {
    run();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ValidationError);
  for (const pattern of patterns) expect((caught as Error).message).toMatch(pattern);
}

function entropyOf(probabilities: readonly number[]): number {
  const sum = probabilities.reduce((a, b) => a + b, 0);
  if (probabilities.length === 1) return 0;
  let h = 0;
  for (const raw of probabilities) {
    const p = raw / sum;
    if (p > 0) h -= p * Math.log(p);
  }
  return h / Math.log(probabilities.length);
}

describe('defaultParameters', () => {
  it("matches Sedna's constructor defaults (Margin and the seed are ours)", () => {
    expect(defaultParameters('IBT')).toEqual({ thresholdImg: 0.5, thresholdBox: 0.5 });
    expect(defaultParameters('Threshold')).toEqual({ threshold: 0.5 });
    expect(defaultParameters('CrossEntropy')).toEqual({ threshold: 0.5 });
    const random = defaultParameters('Random');
    expect(Object.keys(random).sort()).toEqual(['ratio', 'seed']);
    expect(random.ratio).toBe(0.3);
    expect(Number.isInteger(random.seed)).toBe(true);
    expect(defaultParameters('Margin')).toEqual({ margin: 0.2 });
    expect(defaultParameters('EdgeOnly')).toEqual({});
    expect(defaultParameters('CloudOnly')).toEqual({});
  });

  it('returns a fresh object each time', () => {
    const a = defaultParameters('IBT');
    a.thresholdImg = 0.9;
    expect(defaultParameters('IBT').thresholdImg).toBe(0.5);
  });

  it('equals what a miner uses when given nothing', () => {
    for (const name of hemNames) {
      const implicit = createMiner(name);
      const explicit = createMiner(name, defaultParameters(name));
      const outputs = name === 'IBT' ? [det(0.4, 0.9), det()] : [cls(0.55, 0.45), cls(0.9, 0.1)];
      for (const output of outputs) {
        expect(implicit.isHard(output)).toBe(explicit.isHard(output));
        expect(implicit.hardness(output)).toBe(explicit.hardness(output));
      }
    }
  });
});

describe('Threshold', () => {
  it.each([
    // [probabilities, threshold, hard]: Sedna's `confidence < threshold`, strict.
    [[0.7, 0.3], 0.7, false],
    [[0.7 - 1e-6, 0.3 + 1e-6], 0.7, true],
    [[0.7 + 1e-6, 0.3 - 1e-6], 0.7, false],
    [[0.6, 0.3, 0.1], 0.6, false], // sums to 0.9999999999999999: still exactly on the threshold
    [[0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], 0.1, false],
    [[0.5, 0.5], 0.5, false],
    [[0.49, 0.51], 0.52, true],
    [[1, 0], 1, false],
    [[0.999, 0.001], 1, true],
    [[0.5, 0.5], 0, false],
  ])('classification %j at threshold %d: hard=%s', (probabilities, threshold, hard) => {
    expect(createMiner('Threshold', { threshold }).isHard(cls(...probabilities))).toBe(hard);
  });

  it.each([
    // Sedna averages the box scores: (0.6 + 0.8) / 2 = 0.7.
    [[0.6, 0.8], 0.7, false],
    [[0.6, 0.8 - 2e-6], 0.7, true],
    [[0.6, 0.8 + 2e-6], 0.7, false],
    [[0.9, 0.2], 0.5, false],
    [[0.3], 0.5, true],
  ])('detection scores %j at threshold %d: hard=%s', (scores, threshold, hard) => {
    expect(createMiner('Threshold', { threshold }).isHard(det(...scores))).toBe(hard);
  });

  it('hardness is 1 - confidence', () => {
    const miner = createMiner('Threshold');
    expect(miner.hardness(cls(0.7, 0.3))).toBeCloseTo(0.3, 12);
    expect(miner.hardness(cls(1, 0))).toBe(0);
    expect(miner.hardness(det(0.6, 0.8))).toBeCloseTo(0.3, 12);
  });

  it('treats a detection with no boxes as hard (Sedna: not hard)', () => {
    const miner = createMiner('Threshold', { threshold: 0.01 });
    expect(miner.isHard(det())).toBe(true);
    expect(miner.hardness(det())).toBe(1);
  });
});

describe('IBT', () => {
  it.each([
    // [scores, thresholdImg, thresholdBox, hard]: low is score <= box, hard is low share >= 1 - img.
    [[0.5, 0.9], 0.5, 0.5, true], // both comparisons inclusive: 0.5 is low, 1/2 >= 0.5
    [[0.5 + 1e-6, 0.9], 0.5, 0.5, false],
    [[0.5 - 1e-6, 0.9], 0.5, 0.5, true],
    [[0.2, 0.9, 0.9], 0.5, 0.5, false],
    [[0.2, 0.2, 0.9], 0.5, 0.5, true],
    [[0.1, 0.1, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9], 0.7, 0.5, true], // 0.3 >= 1 - 0.7
    [[0.1, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9], 0.7, 0.5, false],
    [[0.1, 0.1, 0.9], 0, 0.5, false], // img 0: hard only when every box is low
    [[0.1, 0.1, 0.1], 0, 0.5, true],
    [[0.9, 0.9, 0.9], 1, 0.5, true], // img 1: always hard
    [[0.9, 1], 0.5, 1, true], // box 1: every box is low
    [[0, 0.1], 0.5, 0, true], // box 0: only a zero score is low
    [[0.1, 0.1], 0.5, 0, false],
  ])('scores %j, img %d, box %d: hard=%s', (scores, thresholdImg, thresholdBox, hard) => {
    const miner = createMiner('IBT', { thresholdImg, thresholdBox });
    expect(miner.isHard(det(...scores))).toBe(hard);
  });

  it('hardness is the share of low boxes', () => {
    const miner = createMiner('IBT');
    expect(miner.hardness(det(0.1, 0.9, 0.9, 0.9))).toBe(0.25);
    expect(miner.hardness(det(0.9))).toBe(0);
    expect(miner.hardness(det(0.1))).toBe(1);
  });

  it('treats zero boxes as hard with hardness 1 (Sedna: "invalid input", not hard)', () => {
    for (const thresholdImg of [0, 0.5, 1]) {
      const miner = createMiner('IBT', { thresholdImg });
      expect(miner.isHard(det())).toBe(true);
      expect(miner.hardness(det())).toBe(1);
    }
  });

  it('needs detection output', () => {
    expectValidation(() => createMiner('IBT').isHard(cls(0.5, 0.5)), 'IBT', 'detection');
  });
});

describe('CrossEntropy', () => {
  it.each([
    // [probabilities, threshold, hard]: Sedna's `1 - H/ln N < threshold`, strict.
    [[0.25, 0.25, 0.25, 0.25], 0.5, true],
    [[1, 0, 0], 0.5, false],
    [[0.5, 0.5, 0, 0], 0.5, false], // H/ln N = ln 2 / ln 4 = 0.5 exactly: on the threshold
    [[0.5, 0.5, 0, 0], 0.5 + 1e-6, true],
    [[0.5, 0.5], 0, false], // threshold 0: never hard
    [[0.999, 0.001], 1, true], // threshold 1: hard unless certain
    [[1, 0], 1, false],
  ])('%j at threshold %d: hard=%s', (probabilities, threshold, hard) => {
    expect(createMiner('CrossEntropy', { threshold }).isHard(cls(...probabilities))).toBe(hard);
  });

  it('decides at 1 - normalized entropy, just below and above', () => {
    const probabilities = [0.8, 0.15, 0.05];
    const confidence = 1 - entropyOf(probabilities);
    const at = (threshold: number) =>
      createMiner('CrossEntropy', { threshold }).isHard(cls(...probabilities));
    expect(at(confidence)).toBe(false);
    expect(at(confidence - 1e-6)).toBe(false);
    expect(at(confidence + 1e-6)).toBe(true);
  });

  it('hardness is normalized entropy', () => {
    const miner = createMiner('CrossEntropy');
    expect(miner.hardness(cls(0.25, 0.25, 0.25, 0.25))).toBeCloseTo(1, 12);
    expect(miner.hardness(cls(0.5, 0.5, 0, 0))).toBe(0.5);
    expect(miner.hardness(cls(0.8, 0.2))).toBeCloseTo(entropyOf([0.8, 0.2]), 12);
  });

  it('lets a zero probability contribute 0 (Sedna: math.log(0) raises)', () => {
    const miner = createMiner('CrossEntropy');
    expect(miner.hardness(cls(1, 0))).toBe(0);
    expect(miner.isHard(cls(1, 0))).toBe(false);
    expect(miner.hardness(cls(0, 0.5, 0.5))).toBeCloseTo(Math.log(2) / Math.log(3), 12);
  });

  it('treats a single class as certain (Sedna: division by ln 1 = 0)', () => {
    for (const threshold of [0, 0.5, 1]) {
      const miner = createMiner('CrossEntropy', { threshold });
      expect(miner.hardness(cls(1))).toBe(0);
      expect(miner.isHard(cls(1))).toBe(false);
    }
  });

  it('rescales a row that does not sum to 1', () => {
    const miner = createMiner('CrossEntropy');
    expect(miner.hardness(cls(0.3, 0.1))).toBeCloseTo(miner.hardness(cls(0.75, 0.25)), 12);
    expect(miner.hardness(cls(0.4, 0.4))).toBeCloseTo(1, 12);
  });

  it('reads detections box by box: the least certain box decides, no boxes is hard', () => {
    const ce = (threshold: number) => createMiner('CrossEntropy', { threshold });
    const boxes = (...b: Array<{ score: number; classScores?: number[] }>) => ({
      kind: 'detection' as const,
      boxes: b,
    });
    // No class scores: the box's own pair [0.9, 0.1]; H / ln 2 = 0.325083 / 0.693147 = 0.468996.
    expect(ce(0.5).hardness(boxes({ score: 0.9 }))).toBeCloseTo(0.468996, 6);
    expect(ce(0.5).isHard(boxes({ score: 0.9 }))).toBe(false); // 1 - 0.469 = 0.531 >= 0.5
    expect(ce(0.6).isHard(boxes({ score: 0.9 }))).toBe(true); // 0.531 < 0.6
    // Class scores [0.5, 0.5, 0, 0]: ln 2 / ln 4 = 0.5, exactly on the cut at 0.5: not hard.
    const even = { score: 0.8, classScores: [0.5, 0.5, 0, 0] };
    expect(ce(0.5).hardness(boxes(even))).toBeCloseTo(0.5, 12);
    expect(ce(0.5).isHard(boxes(even))).toBe(false);
    // A certain box beside a uniform one: the uniform one (hardness 1) decides.
    const mixed = boxes(
      { score: 0.99, classScores: [1, 0] },
      { score: 0.6, classScores: [0.25, 0.25, 0.25, 0.25] },
    );
    expect(ce(0.5).hardness(mixed)).toBe(1);
    expect(ce(0.1).isHard(mixed)).toBe(true);
    // Zero boxes: nothing the edge trusts, as for IBT.
    expect(ce(0.5).hardness(boxes())).toBe(1);
    expect(ce(0.01).isHard(boxes())).toBe(true); // confidence 0 < 0.01 (at 0 nothing is hard)
    expectValidation(
      () => ce(0.5).isHard(boxes({ score: 0.9, classScores: [0.5, 1.5] })),
      'boxes[0].classScores[1]',
    );
  });
});

describe('Margin', () => {
  it.each([
    // [probabilities, margin, hard]: hard when top1 - top2 < margin, strict.
    [[0.6, 0.4], 0.2, false], // 0.6 - 0.4 = 0.19999999999999996: on the margin
    [[0.6 - 1e-6, 0.4 + 1e-6], 0.2, true],
    [[0.6 + 1e-6, 0.4 - 1e-6], 0.2, false],
    [[0.7, 0.2, 0.1], 0.5, false], // 0.7 - 0.2 = 0.49999999999999994
    [[0.47, 0.3, 0.23], 0.17, false], // binary rounding alone would call this hard
    [[0.1, 0.45, 0.45], 0.2, true],
    [[0.5, 0.5], 0, false], // margin 0: never hard
    [[0.999, 0.001], 1, true],
    [[1, 0], 1, false],
  ])('%j at margin %d: hard=%s', (probabilities, margin, hard) => {
    expect(createMiner('Margin', { margin }).isHard(cls(...probabilities))).toBe(hard);
  });

  it('hardness is 1 - margin; one class has margin = top1 = 1', () => {
    const miner = createMiner('Margin', { margin: 1 });
    expect(miner.hardness(cls(0.5, 0.5))).toBe(1);
    expect(miner.hardness(cls(0.7, 0.1, 0.2))).toBeCloseTo(0.5, 12);
    expect(miner.hardness(cls(1))).toBe(0);
    expect(miner.isHard(cls(1))).toBe(false);
  });
});

describe('Random', () => {
  const draws = (miner: HardExampleMiner, n: number) =>
    Array.from({ length: n }, () => miner.isHard(cls(1)));

  it.each([
    [0.3, 42],
    [0.05, 1],
    [0.5, 7],
    [0.9, 123456789],
    [0.3, 0],
  ])('sends about ratio %d of 10,000 inputs (seed %d), within 3 sigma', (ratio, seed) => {
    const n = 10_000;
    const hard = draws(createMiner('Random', { ratio, seed }), n).filter(Boolean).length;
    const sigma = Math.sqrt(n * ratio * (1 - ratio));
    expect(Math.abs(hard - n * ratio)).toBeLessThanOrEqual(3 * sigma);
  });

  it('repeats the same sequence for the same seed, and another for another seed', () => {
    const a = draws(createMiner('Random', { seed: 99 }), 1000);
    expect(draws(createMiner('Random', { seed: 99 }), 1000)).toEqual(a);
    expect(draws(createMiner('Random', { seed: 100 }), 1000)).not.toEqual(a);
    expect(draws(createMiner('Random'), 1000)).toEqual(draws(createMiner('Random'), 1000));
  });

  it('gives each instance its own stream, untouched by hardness()', () => {
    const expected = draws(createMiner('Random', { seed: 5 }), 200);
    const x = createMiner('Random', { seed: 5 });
    const y = createMiner('Random', { seed: 5 });
    const xs: boolean[] = [];
    const ys: boolean[] = [];
    for (let i = 0; i < 200; i++) {
      xs.push(x.isHard(cls(1)));
      expect(x.hardness(det())).toBe(0.5);
      ys.push(y.isHard(det(0.2)));
    }
    expect(xs).toEqual(expected);
    expect(ys).toEqual(expected);
  });

  it('never at ratio 0, always at ratio 1', () => {
    expect(draws(createMiner('Random', { ratio: 0 }), 1000).some(Boolean)).toBe(false);
    expect(draws(createMiner('Random', { ratio: 1 }), 1000).every(Boolean)).toBe(true);
  });
});

describe('EdgeOnly and CloudOnly', () => {
  it.each([cls(0.5, 0.5), cls(1), det(), det(0.1, 0.9)])('decide %j by name alone', (output) => {
    expect(createMiner('EdgeOnly').isHard(output)).toBe(false);
    expect(createMiner('EdgeOnly').hardness(output)).toBe(0);
    expect(createMiner('CloudOnly').isHard(output)).toBe(true);
    expect(createMiner('CloudOnly').hardness(output)).toBe(1);
  });
});

describe('input validation', () => {
  const classifiers = hemNames.filter((name) => name !== 'IBT');

  it.each([
    [[0.5, Number.NaN], /probabilities\[1\].*NaN/],
    [[0.5, -0.1], /probabilities\[1\].*-0\.1/],
    [[1.5, 0], /probabilities\[0\].*1\.5/],
    [[Number.POSITIVE_INFINITY], /probabilities\[0\].*Infinity/],
    [[], /at least one class/],
    [[0, 0], /all zero/],
  ])('rejects probabilities %j in every miner that takes them', (probabilities, pattern) => {
    for (const name of classifiers) {
      expectValidation(() => createMiner(name).isHard(cls(...probabilities)), pattern);
      expectValidation(() => createMiner(name).hardness(cls(...probabilities)), pattern);
    }
  });

  it.each([[[Number.NaN]], [[0.5, 2]], [[-1]]])('rejects box scores %j', (scores) => {
    for (const name of ['IBT', 'Threshold', 'Random', 'EdgeOnly', 'CloudOnly'] as const) {
      expectValidation(() => createMiner(name).isHard(det(...scores)), /boxes\[\d\]\.score/);
    }
  });

  it('rejects an unknown output kind', () => {
    const output = { kind: 'segmentation' } as unknown as EdgeOutput;
    for (const name of hemNames) {
      expectValidation(() => createMiner(name).isHard(output), 'segmentation');
    }
  });

  it('reads Margin on detections box by box, as CrossEntropy', () => {
    const margin = createMiner('Margin', { margin: 0.2 });
    const boxes = (...b: Array<{ score: number; classScores?: number[] }>) => ({
      kind: 'detection' as const,
      boxes: b,
    });
    expect(margin.isHard(boxes({ score: 0.9, classScores: [0.7, 0.3] }))).toBe(false); // 0.4
    expect(margin.isHard(boxes({ score: 0.9, classScores: [0.6, 0.4] }))).toBe(false); // on it
    expect(margin.isHard(boxes({ score: 0.55 }))).toBe(true); // [0.55, 0.45]: 0.1 < 0.2
    expect(margin.hardness(boxes())).toBe(1);
  });
});

describe('createMiner parameters', () => {
  it.each([
    [{ threshold: 1.5 }, 'threshold'],
    [{ threshold: -0.1 }, 'threshold'],
    [{ threshold: Number.NaN }, 'threshold'],
    [{ thresholdImg: 2 }, 'thresholdImg'],
    [{ thresholdBox: -1 }, 'thresholdBox'],
    [{ ratio: 1.01 }, 'ratio'],
    [{ margin: Number.POSITIVE_INFINITY }, 'margin'],
    [{ seed: 1.5 }, 'seed'],
    [{ seed: -1 }, 'seed'],
    [{ seed: 2 ** 32 }, 'seed'],
    [{ threshold: '0.5' as unknown as number }, 'threshold'],
  ] as [HemParameters, string][])('rejects %j naming %s', (parameters, key) => {
    expectValidation(() => createMiner('Threshold', parameters), new RegExp(`^${key}:`));
  });

  it('accepts the ends of every range', () => {
    for (const name of hemNames) {
      for (const value of [0, 1]) {
        const miner = createMiner(name, {
          threshold: value,
          thresholdImg: value,
          thresholdBox: value,
          ratio: value,
          margin: value,
          seed: value === 0 ? 0 : 2 ** 32 - 1,
        });
        expect(miner.name).toBe(name);
      }
    }
  });

  it('rejects an unknown name', () => {
    expectValidation(() => createMiner('Entropy' as HemName), /^name:.*"Entropy"/);
  });
});

describe('parseHemParameters', () => {
  it('maps Sedna keys from a CRD parameters list, leaving the worker its own keys', () => {
    const parameters = parseHemParameters('IBT', [
      { key: 'threshold_img', value: '0.9' },
      { key: 'threshold_box', value: '0.3' },
      { key: 'image_dir', value: '/data/hard' },
    ]);
    expect(parameters).toEqual({ thresholdImg: 0.9, thresholdBox: 0.3 });
  });

  it.each([
    ['Threshold', { threshold: '0.9' }, { threshold: 0.9 }],
    ['CrossEntropy', { threshold_cross_entropy: '0.4' }, { threshold: 0.4 }],
    ['CrossEntropy', { threshold: '0.4' }, { threshold: 0.4 }],
    ['Random', { random_ratio: '0.25', seed: '42' }, { ratio: 0.25, seed: 42 }],
    ['Margin', { margin: '.15' }, { margin: 0.15 }],
    ['EdgeOnly', { threshold: 'anything' }, {}],
    ['CloudOnly', {}, {}],
    ['Threshold', { threshold: ' 5e-1\n' }, { threshold: 0.5 }],
    ['Threshold', { threshold: '1' }, { threshold: 1 }],
    ['Threshold', { threshold: '0' }, { threshold: 0 }],
    ['Threshold', { threshold_img: 'not mine', random_ratio: 'x' }, {}],
  ] as [HemName, Record<string, string>, HemParameters][])(
    '%s reads %j as %j',
    (name, record, expected) => {
      expect(parseHemParameters(name, record)).toEqual(expected);
    },
  );

  it('turns a string random_ratio into a working miner (Sedna compares str < float)', () => {
    const miner = createMiner('Random', parseHemParameters('Random', { random_ratio: '1' }));
    expect(miner.isHard(cls(1))).toBe(true);
  });

  it('reads threshold_img as a number, not a string (IBT decides as with 0.9)', () => {
    const parsed = createMiner('IBT', parseHemParameters('IBT', { threshold_img: '0.9' }));
    const direct = createMiner('IBT', { thresholdImg: 0.9 });
    for (const output of [det(0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9), det(0.9)]) {
      expect(parsed.isHard(output)).toBe(direct.isHard(output));
    }
  });

  it.each([
    ['IBT', 'threshold_img', '0.6x'],
    ['IBT', 'threshold_box', ''],
    ['IBT', 'threshold_box', '   '],
    ['Threshold', 'threshold', 'nan'],
    ['Threshold', 'threshold', 'NaN'],
    ['Threshold', 'threshold', 'inf'],
    ['Threshold', 'threshold', 'Infinity'],
    ['Threshold', 'threshold', '0x1'],
    ['Threshold', 'threshold', '1_0'],
    ['Threshold', 'threshold', '1.5'],
    ['Threshold', 'threshold', '-0.1'],
    ['CrossEntropy', 'threshold_cross_entropy', '0,5'],
    ['Random', 'random_ratio', '30%'],
    ['Random', 'seed', '1.5'],
    ['Random', 'seed', '-1'],
    ['Random', 'seed', '4294967296'],
    ['Margin', 'margin', '2'],
  ] as [HemName, string, string][])('%s rejects %s=%j naming key and value', (name, key, value) => {
    expectValidation(
      () => parseHemParameters(name, [{ key, value }]),
      new RegExp(`^${key}:`),
      JSON.stringify(value),
    );
  });

  it('rejects a missing value', () => {
    const pairs = [{ key: 'threshold' }] as unknown as { key: string; value: string }[];
    expectValidation(() => parseHemParameters('Threshold', pairs), /^threshold:/);
  });

  it('refuses to guess between two values for one field', () => {
    expectValidation(
      () =>
        parseHemParameters('Threshold', [
          { key: 'threshold', value: '0.3' },
          { key: 'threshold', value: '0.6' },
        ]),
      'threshold: given more than once',
    );
    expectValidation(
      () =>
        parseHemParameters('CrossEntropy', { threshold_cross_entropy: '0.3', threshold: '0.3' }),
      /conflicts with/,
    );
  });
});

describe('properties', () => {
  const probability = fc.oneof(
    fc.constant(0),
    fc.constant(1),
    fc.double({ min: 0, max: 1, noNaN: true }),
  );
  const row = fc
    .array(probability, { minLength: 1, maxLength: 12 })
    .filter((p) => p.some((q) => q > 0));
  const rows = fc.array(row, { minLength: 2, maxLength: 20 });
  const scores = fc.array(probability, { maxLength: 12 });
  const unit = fc.oneof(
    fc.constant(0),
    fc.constant(0.5),
    fc.constant(1),
    fc.double({ min: 0, max: 1, noNaN: true }),
  );
  const parameters = fc.record({
    threshold: unit,
    thresholdImg: unit,
    thresholdBox: unit,
    ratio: unit,
    margin: unit,
    seed: fc.nat({ max: 2 ** 32 - 1 }),
  });

  it('hardness lies in [0, 1] for any valid input', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...hemNames),
        parameters,
        row,
        scores,
        (name, params, probabilities, boxScores) => {
          const miner = createMiner(name, params);
          const outputs: EdgeOutput[] = [];
          if (name !== 'IBT') outputs.push(cls(...probabilities));
          if (name !== 'CrossEntropy' && name !== 'Margin') outputs.push(det(...boxScores));
          for (const output of outputs) {
            const h = miner.hardness(output);
            expect(h).toBeGreaterThanOrEqual(0);
            expect(h).toBeLessThanOrEqual(1);
            expect(typeof miner.isHard(output)).toBe('boolean');
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  /** isHard is a step function of hardness: never hard at one hardness and easy at a higher one. */
  function expectStep(miner: HardExampleMiner, outputs: readonly EdgeOutput[]): void {
    const judged = outputs
      .map((output) => ({ h: miner.hardness(output), hard: miner.isHard(output) }))
      .sort((a, b) => a.h - b.h);
    for (let i = 1; i < judged.length; i++) {
      const [lower, higher] = [judged[i - 1], judged[i]];
      if (lower?.hard === true) expect(higher?.hard).toBe(true);
      if (lower?.h === higher?.h) expect(lower?.hard).toBe(higher?.hard);
    }
  }

  it.each(['Threshold', 'Margin', 'CrossEntropy'] as const)(
    '%s on class rows decides by hardness alone',
    (name) => {
      fc.assert(
        fc.property(parameters, rows, (params, probabilityRows) => {
          expectStep(
            createMiner(name, params),
            probabilityRows.map((p) => cls(...p)),
          );
        }),
        { numRuns: 300 },
      );
    },
  );

  it.each(['IBT', 'Threshold'] as const)('%s on detections decides by hardness alone', (name) => {
    fc.assert(
      fc.property(parameters, fc.array(scores, { minLength: 2, maxLength: 20 }), (params, sets) => {
        expectStep(
          createMiner(name, params),
          sets.map((s) => det(...s)),
        );
      }),
      { numRuns: 300 },
    );
  });

  const clear = (a: number, b: number) => Math.abs(a - b) > 1e-6;

  it("agrees with Sedna's raw comparisons away from ties", () => {
    fc.assert(
      fc.property(parameters, row, scores, (params, probabilities, boxScores) => {
        const sum = probabilities.reduce((a, b) => a + b, 0);
        const top = Math.max(...probabilities) / sum;
        if (clear(top, params.threshold)) {
          expect(createMiner('Threshold', params).isHard(cls(...probabilities))).toBe(
            top < params.threshold,
          );
        }
        const confidence = 1 - entropyOf(probabilities);
        if (clear(confidence, params.threshold)) {
          expect(createMiner('CrossEntropy', params).isHard(cls(...probabilities))).toBe(
            confidence < params.threshold,
          );
        }
        if (boxScores.length > 0 && boxScores.every((s) => clear(s, params.thresholdBox))) {
          const share = boxScores.filter((s) => s <= params.thresholdBox).length / boxScores.length;
          if (clear(share, 1 - params.thresholdImg)) {
            expect(createMiner('IBT', params).isHard(det(...boxScores))).toBe(
              share >= 1 - params.thresholdImg,
            );
          }
        }
      }),
      { numRuns: 1000 },
    );
  });
});
