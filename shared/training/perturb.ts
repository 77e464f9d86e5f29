/**
 * Seeded image perturbations for measuring accuracy under drift (issue 15): a model trained on
 * clean digits meets noisy, shifted, rotated, blurred, thickened, occluded and washed-out ones.
 * Images are single-channel, `count` of `height` x `width` in one flat row-major Float32Array,
 * pixels in [0, 1] (white strokes on black, as MNIST and the detection canvases).
 *
 * Every kind has `strength` 0 as the identity, and larger strengths hurt more:
 * - `noise`: additive Gaussian noise of standard deviation `strength`, then clamped to [0, 1]
 *   (on the black background half the noise is clipped away, as on a real sensor's floor).
 * - `translation`: each image moves by `strength` pixels in a direction uniform in [0, 360)
 *   degrees, sampled bilinearly (so fractions of a pixel are real shifts: the MLP edge model
 *   already loses about 7 points at one whole pixel, so the weak end of the scale lies below);
 *   what enters from outside is 0.
 * - `rotation`: each image turns by `strength` degrees about its centre, clockwise or
 *   anticlockwise with equal odds, sampled bilinearly; what enters from outside is 0.
 * - `blur`: Gaussian blur of standard deviation `strength` pixels (separable kernel cut at
 *   3 sigma, edges replicated).
 * - `dilation`: grey-level dilation (the maximum) over a disc of radius `strength` pixels with a
 *   soft rim (structuringElement): thickens the strokes as a bolder pen or a bleeding sensor
 *   does, by a fraction of a pixel for radii below 1.
 * - `occlusion`: a square of side round(strength x min(height, width)) at a uniform position
 *   fully inside the image is set to 0, the background: it erases part of the strokes as an
 *   object in front or a dead sensor region would. Setting it to 1 would paste a white block,
 *   which is a different and far easier shift to notice; erasing keeps the image looking like a
 *   plausible, partly missing digit, the harder case for a drift detector.
 * - `contrast`: each image is blended towards its own mean, x' = m + (1 - strength)(x - m), as
 *   torchvision's adjust_contrast does: `strength` is the fraction of contrast removed (0.6
 *   leaves 40%), the black background turns grey and the strokes dim, as in a washed-out
 *   exposure. Scaling around 0 instead would only dim the strokes and keep the background
 *   black: a milder shift, and not what a washed-out image looks like.
 *
 * The random draws come from one seeded stream per call (mulberry32), in image order, so the
 * same images, perturbation and seed give the same output on every machine.
 *
 * Detection canvases: `translateBoxes` moves the ground-truth boxes with the same shifts
 * (same seed, same count), so the detection suite (`detectionSuite`) is the whole suite less
 * `rotation`, whose boxes cannot follow exactly. Blur and dilation spread a digit by a pixel or
 * two past its box, and occlusion may erase a digit whose box remains: the boxes are left as they
 * are for those, which makes them harder rather than wrong.
 */
import { normal, seededRandom } from '../random/index.js';

type PerturbationKind =
  'noise' | 'translation' | 'rotation' | 'blur' | 'dilation' | 'occlusion' | 'contrast';

interface Perturbation {
  readonly kind: PerturbationKind;
  readonly strength: number;
  /** What a table or a log line calls it, e.g. "rotation 30deg"; unique within the suite. */
  readonly label: string;
}

const perturbationKinds: readonly PerturbationKind[] = [
  'noise',
  'translation',
  'rotation',
  'blur',
  'dilation',
  'occlusion',
  'contrast',
];

/** The label a perturbation gets in the suite. */
function labelOf(kind: PerturbationKind, strength: number): string {
  switch (kind) {
    case 'noise':
      return `noise sigma ${strength}`;
    case 'translation':
      return `translation ${strength}px`;
    case 'rotation':
      return `rotation ${strength}deg`;
    case 'blur':
      return `blur sigma ${strength}`;
    case 'dilation':
      return `dilation r${strength}`;
    case 'occlusion':
      return `occlusion ${Math.round(strength * 100)}%`;
    case 'contrast':
      return `contrast -${Math.round(strength * 100)}%`;
  }
}

const perturbation = (kind: PerturbationKind, strength: number): Perturbation => ({
  kind,
  strength,
  label: labelOf(kind, strength),
});

/**
 * Strengths per kind, weakest first: the weakest costs the edge digit classifier (models/
 * edge.onnx) about a point of test accuracy or less, the strongest a large share (the figures
 * are in models/MODEL_CARD.md, measured by bin/fit-drift-references.ts).
 */
const strengths: Readonly<Record<PerturbationKind, readonly number[]>> = {
  noise: [0.02, 0.05, 0.1, 0.3],
  translation: [0.25, 1, 2, 3],
  rotation: [5, 15, 30, 45],
  blur: [0.5, 1, 1.5, 2.5],
  dilation: [0.25, 0.5, 1, 2],
  occlusion: [0.1, 0.2, 0.35, 0.5],
  contrast: [0.05, 0.15, 0.3, 0.5],
};

const perturbationSuite: readonly Perturbation[] = perturbationKinds.flatMap((kind) =>
  strengths[kind].map((s) => perturbation(kind, s)),
);

/** The suite for the detection canvases: every kind whose ground-truth boxes can follow. */
const detectionSuite: readonly Perturbation[] = perturbationSuite.filter(
  (p) => p.kind !== 'rotation',
);

const clamp01 = (v: number) => (v < 0 ? 0 : v > 1 ? 1 : v);

function checkArguments(
  images: ArrayLike<number>,
  count: number,
  height: number,
  width: number,
  p: Perturbation,
): void {
  for (const [name, value] of [
    ['count', count],
    ['height', height],
    ['width', width],
  ] as const) {
    if (!Number.isInteger(value) || value < 0) {
      throw new RangeError(`${name} must be a whole number >= 0, got ${value}`);
    }
  }
  if (images.length !== count * height * width) {
    throw new RangeError(
      `expected ${count} x ${height} x ${width} = ${count * height * width} pixels, got ${images.length}`,
    );
  }
  if (!Number.isFinite(p.strength) || p.strength < 0) {
    throw new RangeError(`${p.kind}: strength must be finite and >= 0, got ${p.strength}`);
  }
  if ((p.kind === 'contrast' || p.kind === 'occlusion') && p.strength > 1) {
    throw new RangeError(`${p.kind}: strength is a fraction in [0, 1], got ${p.strength}`);
  }
}

/**
 * Each image's shift for `translation` by `strength` pixels: dx (columns, + right) and dy (rows,
 * + down) per image, interleaved, the vector of length `strength` at an angle uniform in
 * [0, 2 pi). The same stream perturbImages draws from, so boxes and pixels move together.
 */
function translationOffsets(count: number, strength: number, seed: number): Float64Array {
  const uniform = seededRandom(seed);
  const out = new Float64Array(2 * count);
  for (let i = 0; i < count; i += 1) {
    const angle = 2 * Math.PI * uniform();
    out[2 * i] = strength * Math.cos(angle);
    out[2 * i + 1] = strength * Math.sin(angle);
  }
  return out;
}

/** Bilinear sampling of one image at (x, y); outside the image reads 0. */
function sample(src: Float32Array, h: number, w: number, x: number, y: number): number {
  const x0 = Math.floor(x);
  const y0 = Math.floor(y);
  const fx = x - x0;
  const fy = y - y0;
  const at = (u: number, v: number) => (u < 0 || u >= w || v < 0 || v >= h ? 0 : src[v * w + u]!);
  // Exact shifts (whole pixels) read one pixel, so they move values without smoothing them.
  const top = fx === 0 ? at(x0, y0) : at(x0, y0) * (1 - fx) + at(x0 + 1, y0) * fx;
  if (fy === 0) return top;
  const bottom = fx === 0 ? at(x0, y0 + 1) : at(x0, y0 + 1) * (1 - fx) + at(x0 + 1, y0 + 1) * fx;
  return top * (1 - fy) + bottom * fy;
}

function translate(
  src: Float32Array,
  out: Float32Array,
  h: number,
  w: number,
  dx: number,
  dy: number,
): void {
  for (let y = 0; y < h; y += 1) {
    for (let x = 0; x < w; x += 1) out[y * w + x] = sample(src, h, w, x - dx, y - dy);
  }
}

/** Bilinear rotation by `radians` about the image centre; outside the source reads 0. */
function rotate(src: Float32Array, out: Float32Array, h: number, w: number, radians: number) {
  const cos = Math.cos(radians);
  const sin = Math.sin(radians);
  const cx = (w - 1) / 2;
  const cy = (h - 1) / 2;
  for (let y = 0; y < h; y += 1) {
    for (let x = 0; x < w; x += 1) {
      // The inverse rotation: where in the source this output pixel comes from.
      const sx = cx + cos * (x - cx) + sin * (y - cy);
      const sy = cy - sin * (x - cx) + cos * (y - cy);
      out[y * w + x] = sample(src, h, w, sx, sy);
    }
  }
}

/** The normalized Gaussian kernel of standard deviation `sigma`, cut at 3 sigma. */
function gaussianKernel(sigma: number): Float64Array {
  const radius = Math.max(1, Math.ceil(3 * sigma));
  const kernel = new Float64Array(2 * radius + 1);
  let sum = 0;
  for (let k = -radius; k <= radius; k += 1) {
    const v = Math.exp(-(k * k) / (2 * sigma * sigma));
    kernel[k + radius] = v;
    sum += v;
  }
  for (let k = 0; k < kernel.length; k += 1) kernel[k] = kernel[k]! / sum;
  return kernel;
}

function blur(src: Float32Array, out: Float32Array, h: number, w: number, kernel: Float64Array) {
  const radius = (kernel.length - 1) / 2;
  const rows = new Float64Array(h * w);
  for (let y = 0; y < h; y += 1) {
    for (let x = 0; x < w; x += 1) {
      let acc = 0;
      for (let k = -radius; k <= radius; k += 1) {
        const sx = Math.min(w - 1, Math.max(0, x + k));
        acc += kernel[k + radius]! * src[y * w + sx]!;
      }
      rows[y * w + x] = acc;
    }
  }
  for (let y = 0; y < h; y += 1) {
    for (let x = 0; x < w; x += 1) {
      let acc = 0;
      for (let k = -radius; k <= radius; k += 1) {
        const sy = Math.min(h - 1, Math.max(0, y + k));
        acc += kernel[k + radius]! * rows[sy * w + x]!;
      }
      out[y * w + x] = acc;
    }
  }
}

/**
 * The structuring element of a dilation of radius r: offsets (dx, dy) and their weights, an
 * offset at distance d from the centre weighing clamp(r + 1 - d, 0, 1): the flat disc d <= r at
 * full weight and a soft rim one pixel wide beyond it, so radii below 1 thicken strokes by a
 * fraction of a pixel instead of jumping straight to a whole one.
 */
function structuringElement(radius: number): { offsets: Int32Array; weights: Float64Array } {
  const reach = Math.ceil(radius);
  const offsets: number[] = [];
  const weights: number[] = [];
  for (let dy = -reach; dy <= reach; dy += 1) {
    for (let dx = -reach; dx <= reach; dx += 1) {
      const weight = Math.min(1, radius + 1 - Math.hypot(dx, dy));
      if (weight <= 0) continue;
      offsets.push(dx, dy);
      weights.push(weight);
    }
  }
  return { offsets: Int32Array.from(offsets), weights: Float64Array.from(weights) };
}

/** Grey-level dilation with a weighted (non-flat) element: the maximum of weight x pixel. */
function dilate(
  src: Float32Array,
  out: Float32Array,
  h: number,
  w: number,
  element: { offsets: Int32Array; weights: Float64Array },
) {
  const { offsets, weights } = element;
  for (let y = 0; y < h; y += 1) {
    for (let x = 0; x < w; x += 1) {
      let max = 0;
      for (let k = 0; k < weights.length; k += 1) {
        const sx = x + offsets[2 * k]!;
        const sy = y + offsets[2 * k + 1]!;
        if (sx >= 0 && sx < w && sy >= 0 && sy < h) {
          max = Math.max(max, weights[k]! * src[sy * w + sx]!);
        }
      }
      out[y * w + x] = max;
    }
  }
}

/** Blacks out one square of side `strength` x the shorter side, at a uniform position. */
function occlude(
  src: Float32Array,
  dst: Float32Array,
  height: number,
  width: number,
  strength: number,
  uniform: () => number,
): void {
  dst.set(src);
  const side = Math.min(height, width, Math.round(strength * Math.min(height, width)));
  const top = Math.floor(uniform() * (height - side + 1));
  const left = Math.floor(uniform() * (width - side + 1));
  for (let y = top; y < top + side; y += 1) dst.fill(0, y * width + left, y * width + left + side);
}

/** Pulls every pixel towards the image's mean by `strength` (1: flat grey). */
function reduceContrast(src: Float32Array, dst: Float32Array, strength: number): void {
  const size = src.length;
  let mean = 0;
  for (let k = 0; k < size; k += 1) mean += src[k]!;
  mean /= size || 1;
  const keep = 1 - strength;
  for (let k = 0; k < size; k += 1) dst[k] = mean + keep * (src[k]! - mean);
}

/**
 * Image `i`'s perturbation, from `src` into `dst` (unclamped). What a kind draws comes from one
 * generator seeded with `seed`, image after image, so the output depends on the arguments only.
 */
function perturber(
  p: Perturbation,
  count: number,
  height: number,
  width: number,
  seed: number,
): (src: Float32Array, dst: Float32Array, i: number) => void {
  const uniform = seededRandom(seed);
  switch (p.kind) {
    case 'noise': {
      const gaussian = normal(uniform);
      return (src, dst) => {
        for (let k = 0; k < src.length; k += 1) dst[k] = src[k]! + p.strength * gaussian();
      };
    }
    case 'translation': {
      const offsets = translationOffsets(count, p.strength, seed);
      return (src, dst, i) =>
        translate(src, dst, height, width, offsets[2 * i]!, offsets[2 * i + 1]!);
    }
    case 'rotation':
      return (src, dst) => {
        const sign = uniform() < 0.5 ? -1 : 1;
        rotate(src, dst, height, width, (sign * p.strength * Math.PI) / 180);
      };
    case 'blur': {
      const kernel = gaussianKernel(p.strength);
      return (src, dst) => blur(src, dst, height, width, kernel);
    }
    case 'dilation': {
      const element = structuringElement(p.strength);
      return (src, dst) => dilate(src, dst, height, width, element);
    }
    case 'occlusion':
      return (src, dst) => occlude(src, dst, height, width, p.strength, uniform);
    case 'contrast':
      return (src, dst) => reduceContrast(src, dst, p.strength);
  }
}

/**
 * The images with `p` applied: a new array (the input is left as it was), every value clamped
 * to [0, 1], the same output for the same arguments and seed.
 */
function perturbImages(
  images: Float32Array,
  count: number,
  height: number,
  width: number,
  p: Perturbation,
  seed: number,
): Float32Array {
  checkArguments(images, count, height, width, p);
  const size = height * width;
  const out = new Float32Array(images.length);
  if (p.strength === 0) {
    for (let i = 0; i < images.length; i += 1) out[i] = clamp01(images[i]!);
    return out;
  }
  const apply = perturber(p, count, height, width, seed);
  for (let i = 0; i < count; i += 1) {
    const dst = out.subarray(i * size, (i + 1) * size);
    apply(images.subarray(i * size, (i + 1) * size), dst, i);
    for (let k = 0; k < size; k += 1) dst[k] = clamp01(dst[k]!);
  }
  return out;
}

/** A ground-truth box in image pixels, x2/y2 exclusive (detection-data.ts's TruthBox). */
interface Box {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  cls: number;
}

/**
 * The boxes of `perturbImages(images, boxes.length, height, width, p, seed)`'s output: for
 * `translation` each image's boxes move with its pixels, are clipped to the image, and a box
 * pushed wholly out is dropped (a clipped box can be a little larger than the visible part's
 * tight box, when the digit's cut-off part held its extremes). Every other kind but `rotation`
 * keeps its pixels in place, so the boxes are returned as they are (copied); `rotation` throws,
 * as an axis-aligned box does not rotate.
 */
function translateBoxes<B extends Box>(
  boxes: ReadonlyArray<readonly B[]>,
  height: number,
  width: number,
  p: Perturbation,
  seed: number,
): B[][] {
  if (p.kind === 'rotation' && p.strength !== 0) {
    throw new RangeError('rotation moves pixels off the axes: its boxes cannot follow');
  }
  if (p.kind !== 'translation' || p.strength === 0) {
    return boxes.map((list) => list.map((b) => ({ ...b })));
  }
  const offsets = translationOffsets(boxes.length, p.strength, seed);
  return boxes.map((list, i) => {
    const dx = offsets[2 * i]!;
    const dy = offsets[2 * i + 1]!;
    return list
      .map((b) => ({
        ...b,
        x1: Math.max(0, b.x1 + dx),
        y1: Math.max(0, b.y1 + dy),
        x2: Math.min(width, b.x2 + dx),
        y2: Math.min(height, b.y2 + dy),
      }))
      .filter((b) => b.x2 > b.x1 && b.y2 > b.y1);
  });
}

export {
  perturbationKinds,
  perturbationSuite,
  detectionSuite,
  perturbImages,
  translationOffsets,
  translateBoxes,
  labelOf,
};
export type { PerturbationKind, Perturbation };
