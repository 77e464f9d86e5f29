/**
 * The perturbations of issue 15: deterministic, pure (the input is left alone), within [0, 1],
 * the identity at strength 0, and each kind doing what its documentation says on images whose
 * result can be worked out by hand.
 */
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../../shared/random/index.js';
import {
  detectionSuite,
  perturbImages,
  perturbationKinds,
  perturbationSuite,
  translateBoxes,
  translationOffsets,
} from '../../../shared/training/perturb.js';
import type { Perturbation, PerturbationKind } from '../../../shared/training/perturb.js';

const side = 28;
const size = side * side;

/** `count` digit-like images: a random bright blob on black, as MNIST's strokes are. */
function blobs(count: number, seed: number): Float32Array {
  const uniform = seededRandom(seed);
  const images = new Float32Array(count * size);
  for (let i = 0; i < count; i += 1) {
    const cx = 8 + 12 * uniform();
    const cy = 8 + 12 * uniform();
    for (let y = 0; y < side; y += 1) {
      for (let x = 0; x < side; x += 1) {
        const d = Math.hypot(x - cx, y - cy);
        images[i * size + y * side + x] = d < 6 ? Math.min(1, (6 - d) / 3) * uniform() : 0;
      }
    }
  }
  return images;
}

/** One 28x28 image, black but for `value` at (x, y). */
function lit(x: number, y: number, value = 1): Float32Array {
  const image = new Float32Array(size);
  image[y * side + x] = value;
  return image;
}

const p = (kind: PerturbationKind, strength: number): Perturbation => ({
  kind,
  strength,
  label: `${kind} ${strength}`,
});

const sum = (values: ArrayLike<number>) => Array.from(values).reduce((a, b) => a + b, 0);

/** Centre of mass (x, y) of one image. */
function centroid(image: ArrayLike<number>): [number, number] {
  let mass = 0;
  let mx = 0;
  let my = 0;
  for (let i = 0; i < size; i += 1) {
    const v = image[i]!;
    mass += v;
    mx += v * (i % side);
    my += v * Math.floor(i / side);
  }
  return [mx / mass, my / mass];
}

describe('perturbationSuite', () => {
  it('has a unique label per entry and at least 3 rising strengths per kind', () => {
    const labels = perturbationSuite.map((entry) => entry.label);
    expect(new Set(labels).size).toBe(labels.length);
    for (const kind of perturbationKinds) {
      const strengths = perturbationSuite.filter((e) => e.kind === kind).map((e) => e.strength);
      expect(strengths.length, kind).toBeGreaterThanOrEqual(3);
      expect(
        strengths.every((s, i) => i === 0 || s > strengths[i - 1]!),
        kind,
      ).toBe(true);
      expect(strengths[0], kind).toBeGreaterThan(0);
    }
  });

  it('labels say the kind and the strength', () => {
    expect(perturbationSuite.map((e) => e.label)).toEqual(
      expect.arrayContaining([
        'noise sigma 0.1',
        'translation 2px',
        'rotation 30deg',
        'blur sigma 1',
        'dilation r1',
        'occlusion 35%',
        'contrast -30%',
      ]),
    );
  });

  it('the detection suite is every entry but rotation', () => {
    expect(detectionSuite).toEqual(perturbationSuite.filter((e) => e.kind !== 'rotation'));
  });
});

describe('perturbImages', () => {
  const images = blobs(6, 1);
  const before = images.slice();

  it.each(perturbationSuite.map((entry) => [entry.label, entry] as const))(
    '%s: same seed same output, a new array, the input untouched, values in [0, 1]',
    (_label, entry) => {
      const a = perturbImages(images, 6, side, side, entry, 42);
      const b = perturbImages(images, 6, side, side, entry, 42);
      expect(a).not.toBe(images);
      expect(a.length).toBe(images.length);
      expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
      expect(images).toEqual(before);
      expect(a.every((v) => v >= 0 && v <= 1)).toBe(true);
      // A small patch may miss every blob; the occlusion test below covers that kind.
      if (entry.kind !== 'occlusion') expect(a).not.toEqual(images);
    },
  );

  it.each(perturbationKinds)('%s: strength 0 gives the input back', (kind) => {
    expect(perturbImages(images, 6, side, side, p(kind, 0), 3)).toEqual(images);
  });

  it('different seeds draw different noise', () => {
    const a = perturbImages(images, 6, side, side, p('noise', 0.1), 1);
    const b = perturbImages(images, 6, side, side, p('noise', 0.1), 2);
    expect(a).not.toEqual(b);
  });

  it('noise: a grey image gets noise of the given standard deviation', () => {
    const grey = new Float32Array(20 * size).fill(0.5);
    const out = perturbImages(grey, 20, side, side, p('noise', 0.1), 5);
    const mean = sum(out) / out.length;
    const std = Math.sqrt(sum(out.map((v) => (v - mean) ** 2)) / out.length);
    expect(mean).toBeCloseTo(0.5, 2);
    expect(std).toBeGreaterThan(0.095);
    expect(std).toBeLessThan(0.105);
  });

  it('translation: a lit pixel moves by the drawn offset, of length `strength`', () => {
    for (const strength of [1, 2.5]) {
      for (const seed of [1, 2, 3]) {
        const out = perturbImages(lit(13, 10), 1, side, side, p('translation', strength), seed);
        const [dx, dy] = translationOffsets(1, strength, seed);
        expect(Math.hypot(dx!, dy!)).toBeCloseTo(strength, 10);
        expect(sum(out)).toBeCloseTo(1, 5);
        const [cx, cy] = centroid(out);
        expect(cx).toBeCloseTo(13 + dx!, 5);
        expect(cy).toBeCloseTo(10 + dy!, 5);
      }
    }
  });

  it('translation: what enters from outside is black', () => {
    const white = new Float32Array(size).fill(1);
    const out = perturbImages(white, 1, side, side, p('translation', 3), 9);
    const [dx, dy] = translationOffsets(1, 3, 9);
    // The column and row the image moved away from are (at least partly) empty.
    const col = dx! > 0 ? 0 : side - 1;
    const row = dy! > 0 ? 0 : side - 1;
    expect(out[row * side + col]).toBeLessThan(1);
    expect(out[14 * side + 14]).toBe(1);
  });

  it('rotation: 90 degrees takes a lit pixel to where a quarter turn about the centre puts it', () => {
    // Centre (13.5, 13.5): (14, 4) turns to (23, 14) one way and (4, 13) the other.
    const seen = new Set<string>();
    for (let seed = 1; seed <= 8; seed += 1) {
      const out = perturbImages(lit(14, 4), 1, side, side, p('rotation', 90), seed);
      const at = out.findIndex((v) => v > 0.99);
      seen.add(`${at % side},${Math.floor(at / side)}`);
      expect(sum(out)).toBeCloseTo(1, 6);
    }
    // Both directions occur, and nothing else.
    expect([...seen].sort()).toEqual(['23,14', '4,13']);
  });

  it('blur: a lit pixel spreads symmetrically into a Gaussian of the same mass', () => {
    const sigma = 1;
    const out = perturbImages(lit(14, 14), 1, side, side, p('blur', sigma), 1);
    const weights = [-3, -2, -1, 0, 1, 2, 3].map((k) => Math.exp(-(k * k) / (2 * sigma * sigma)));
    const centre = 1 / sum(weights);
    expect(sum(out)).toBeCloseTo(1, 5);
    expect(out[14 * side + 14]).toBeCloseTo(centre * centre, 6);
    expect(out[14 * side + 15]).toBeCloseTo(out[14 * side + 13]!, 7);
    expect(out[13 * side + 14]).toBeCloseTo(out[15 * side + 14]!, 7);
    expect(out[14 * side + 15]).toBeCloseTo(centre * centre * weights[4]!, 6);
    // A flat image stays flat: the edges are replicated, not darkened.
    const flat = perturbImages(new Float32Array(size).fill(0.3), 1, side, side, p('blur', 2), 1);
    expect(flat.every((v) => Math.abs(v - 0.3) < 1e-6)).toBe(true);
  });

  it('dilation: radius 1 lights the cross fully, the diagonals by the soft rim', () => {
    const out = perturbImages(lit(10, 10), 1, side, side, p('dilation', 1), 1);
    const at = (x: number, y: number) => out[y * side + x]!;
    for (const [x, y] of [
      [10, 10],
      [9, 10],
      [11, 10],
      [10, 9],
      [10, 11],
    ] as const) {
      expect(at(x, y)).toBe(1);
    }
    expect(at(9, 9)).toBeCloseTo(2 - Math.SQRT2, 6);
    expect(at(12, 10)).toBe(0);
    // Radius 0.5: the cross at half strength.
    const half = perturbImages(lit(10, 10), 1, side, side, p('dilation', 0.5), 1);
    expect(half[10 * side + 11]).toBeCloseTo(0.5, 6);
    expect(half[10 * side + 10]).toBe(1);
  });

  it('occlusion: a black square of side strength x the image side, inside the image', () => {
    const white = new Float32Array(3 * size).fill(1);
    const out = perturbImages(white, 3, side, side, p('occlusion', 0.25), 4);
    for (let i = 0; i < 3; i += 1) {
      const image = out.subarray(i * size, (i + 1) * size);
      const zeros = [...image.keys()].filter((k) => image[k] === 0);
      expect(zeros.length).toBe(49);
      const xs = zeros.map((k) => k % side);
      const ys = zeros.map((k) => Math.floor(k / side));
      expect(Math.max(...xs) - Math.min(...xs)).toBe(6);
      expect(Math.max(...ys) - Math.min(...ys)).toBe(6);
    }
  });

  it('contrast: each image is blended towards its mean', () => {
    // A 2x2 image with mean 0.25; -60% leaves 40% of each pixel's distance to it.
    const image = Float32Array.from([0, 0, 0, 1]);
    const out = perturbImages(image, 1, 2, 2, p('contrast', 0.6), 1);
    expect(out[0]).toBeCloseTo(0.15, 6);
    expect(out[3]).toBeCloseTo(0.55, 6);
    expect(sum(out)).toBeCloseTo(1, 6);
  });

  it('refuses a pixel count that does not match and strengths out of range', () => {
    expect(() => perturbImages(new Float32Array(10), 1, 3, 3, p('noise', 0.1), 1)).toThrow(
      RangeError,
    );
    expect(() => perturbImages(images, 6, side, side, p('blur', -1), 1)).toThrow(/strength/);
    expect(() => perturbImages(images, 6, side, side, p('contrast', 1.5), 1)).toThrow(/fraction/);
  });
});

describe('translateBoxes', () => {
  const boxes = [
    [{ x1: 10, y1: 12, x2: 20, y2: 25, cls: 3 }],
    [
      { x1: 0, y1: 0, x2: 5, y2: 5, cls: 1 },
      { x1: 40, y1: 40, x2: 50, y2: 52, cls: 7 },
    ],
  ];

  it('moves each image’s boxes by that image’s shift, clipped to the image', () => {
    const moved = translateBoxes(boxes, 64, 64, p('translation', 3), 11);
    const offsets = translationOffsets(2, 3, 11);
    boxes.forEach((list, i) => {
      const dx = offsets[2 * i]!;
      const dy = offsets[2 * i + 1]!;
      const expected = list
        .map((b) => ({
          ...b,
          x1: Math.max(0, b.x1 + dx),
          y1: Math.max(0, b.y1 + dy),
          x2: Math.min(64, b.x2 + dx),
          y2: Math.min(64, b.y2 + dy),
        }))
        .filter((b) => b.x2 > b.x1 && b.y2 > b.y1);
      expect(moved[i]).toEqual(expected);
    });
  });

  it('moves a box with the pixels perturbImages moves', () => {
    const canvas = new Float32Array(64 * 64);
    for (let y = 20; y < 30; y += 1) canvas.fill(1, y * 64 + 24, y * 64 + 32);
    const box = { x1: 24, y1: 20, x2: 32, y2: 30, cls: 0 };
    const rule = p('translation', 4);
    const [moved] = translateBoxes([[box]], 64, 64, rule, 5);
    const out = perturbImages(canvas, 1, 64, 64, rule, 5);
    let mass = 0;
    let mx = 0;
    let my = 0;
    out.forEach((v, k) => {
      mass += v;
      mx += v * ((k % 64) + 0.5);
      my += v * (Math.floor(k / 64) + 0.5);
    });
    expect(mx / mass).toBeCloseTo((moved![0]!.x1 + moved![0]!.x2) / 2, 5);
    expect(my / mass).toBeCloseTo((moved![0]!.y1 + moved![0]!.y2) / 2, 5);
  });

  it('drops a box pushed wholly out, keeps boxes as they are for kinds that do not move pixels', () => {
    const edge = [[{ x1: 0, y1: 0, x2: 1, y2: 1, cls: 2 }]];
    const far = translateBoxes(edge, 64, 64, p('translation', 3), 11);
    const [dx, dy] = translationOffsets(1, 3, 11);
    expect(far[0]!.length).toBe(dx! <= -1 || dy! <= -1 ? 0 : 1);
    const kept = translateBoxes(boxes, 64, 64, p('blur', 1), 1);
    expect(kept).toEqual(boxes);
    expect(kept[0]).not.toBe(boxes[0]);
    expect(() => translateBoxes(boxes, 64, 64, p('rotation', 10), 1)).toThrow(RangeError);
  });
});
