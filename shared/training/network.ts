/**
 * A small feed-forward network trainer: the handful of layers our models need, with exact
 * backward passes (checked numerically in test/shared/training/gradients.test.ts), softmax
 * cross-entropy and Adam. The raw outputs (`logits`) and an arbitrary output gradient
 * (`backpropagate`) are open too, for losses other than cross-entropy: the ASET DQN's TD loss
 * (research/aset/learn/dqn.ts). Written here rather than taken from @tensorflow/tfjs: tfjs-node cannot
 * install on these machines, and pure tfjs adds ~360 MB of packages and trains our CNN several
 * times slower than these typed-array loops. Doubles throughout; the ONNX export is float32.
 */
import { normal } from '../random/index.js';

/** [channels, height, width] for images, [features] after flattening. */
type Shape = readonly number[];

interface Parameter {
  readonly name: string;
  readonly value: Float64Array;
  readonly grad: Float64Array;
}

/** The layers, as data: what the ONNX export and import read. */
type LayerSpec =
  | { type: 'avgpool2' }
  | { type: 'maxpool2' }
  | { type: 'conv3x3'; outChannels: number }
  | { type: 'conv1x1'; outChannels: number }
  | { type: 'dense'; units: number }
  | { type: 'relu' }
  | { type: 'flatten' };

interface Layer {
  readonly spec: LayerSpec;
  readonly inShape: Shape;
  readonly outShape: Shape;
  readonly params: readonly Parameter[];
  /** One sample; keeps what backward needs. */
  forward(input: Float64Array): Float64Array;
  /**
   * Adds this sample's parameter gradients and returns the gradient of the input. With
   * `inputGradient` false the caller will not read the return value (the first layer's input is
   * data, not a parameter), so a layer may skip computing it: that is a third of a wide first
   * dense layer's backward pass.
   */
  backward(gradOut: Float64Array, inputGradient?: boolean): Float64Array;
  /** Multiply-accumulates per sample (for the model card's FLOPs). */
  readonly macs: number;
}

const size = (shape: Shape) => shape.reduce((a, b) => a * b, 1);

function parameter(name: string, length: number): Parameter {
  return { name, value: new Float64Array(length), grad: new Float64Array(length) };
}

function pool(inShape: Shape, kind: 'max' | 'avg'): Layer {
  const [c, h, w] = inShape as [number, number, number];
  const oh = Math.floor(h / 2);
  const ow = Math.floor(w / 2);
  const outShape = [c, oh, ow];
  const out = new Float64Array(c * oh * ow);
  const argmax = new Int32Array(out.length);
  const gradIn = new Float64Array(c * h * w);
  return {
    spec: { type: kind === 'max' ? 'maxpool2' : 'avgpool2' },
    inShape,
    outShape,
    params: [],
    macs: 0,
    forward(input) {
      for (let ch = 0; ch < c; ch += 1) {
        for (let y = 0; y < oh; y += 1) {
          for (let x = 0; x < ow; x += 1) {
            const base = ch * h * w + 2 * y * w + 2 * x;
            const o = ch * oh * ow + y * ow + x;
            if (kind === 'avg') {
              out[o] =
                (input[base]! + input[base + 1]! + input[base + w]! + input[base + w + 1]!) / 4;
            } else {
              // Ties keep the first cell, as the gradient must go to exactly one of them.
              let best = base;
              if (input[base + 1]! > input[best]!) best = base + 1;
              if (input[base + w]! > input[best]!) best = base + w;
              if (input[base + w + 1]! > input[best]!) best = base + w + 1;
              argmax[o] = best;
              out[o] = input[best]!;
            }
          }
        }
      }
      return out;
    },
    backward(gradOut) {
      gradIn.fill(0);
      for (let ch = 0; ch < c; ch += 1) {
        for (let y = 0; y < oh; y += 1) {
          for (let x = 0; x < ow; x += 1) {
            const o = ch * oh * ow + y * ow + x;
            const g = gradOut[o]!;
            if (kind === 'max') gradIn[argmax[o]!]! += g;
            else {
              const base = ch * h * w + 2 * y * w + 2 * x;
              gradIn[base]! += g / 4;
              gradIn[base + 1]! += g / 4;
              gradIn[base + w]! += g / 4;
              gradIn[base + w + 1]! += g / 4;
            }
          }
        }
      }
      return gradIn;
    },
  };
}

/**
 * 3x3 convolution, stride 1, zero padding 1 ("same"); weights in ONNX order [out][in][ky][kx].
 * Inputs and output gradients are copied into zero-bordered buffers so the inner loops have no
 * bounds tests: a detector's 8x8 maps spend most of their time there otherwise. Every sum adds its
 * terms in the same order as the bounds-tested loops did (a padded term adds an exact zero), so
 * the classifiers' committed bytes are unchanged.
 */
function conv3x3(inShape: Shape, outChannels: number, index: number): Layer {
  const [ci, h, w] = inShape as [number, number, number];
  const co = outChannels;
  const hw = h * w;
  const pw = w + 2;
  const pp = (h + 2) * pw;
  const weight = parameter(`conv${index}.weight`, co * ci * 9);
  const bias = parameter(`conv${index}.bias`, co);
  const out = new Float64Array(co * hw);
  const gradIn = new Float64Array(ci * hw);
  const padded = new Float64Array(ci * pp);
  const paddedGrad = new Float64Array(co * pp);
  return {
    spec: { type: 'conv3x3', outChannels },
    inShape,
    outShape: [co, h, w],
    params: [weight, bias],
    macs: co * ci * 9 * hw,
    forward(x) {
      pad(x, padded, ci, h, w);
      for (let o = 0; o < co; o += 1) {
        out.fill(bias.value[o]!, o * hw, (o + 1) * hw);
        for (let i = 0; i < ci; i += 1) {
          convolvePlane(padded, i * pp, weight.value, (o * ci + i) * 9, out, o * hw, h, w);
        }
      }
      return out;
    },
    backward(gradOut, inputGradient = true) {
      for (let o = 0; o < co; o += 1) {
        let gb = 0;
        for (let p = o * hw; p < (o + 1) * hw; p += 1) gb += gradOut[p]!;
        bias.grad[o]! += gb;
        for (let i = 0; i < ci; i += 1) {
          kernelGradient(gradOut, o * hw, padded, i * pp, weight.grad, (o * ci + i) * 9, h, w);
        }
      }
      if (!inputGradient) return gradIn;
      gradIn.fill(0);
      pad(gradOut, paddedGrad, co, h, w);
      for (let o = 0; o < co; o += 1) {
        for (let i = 0; i < ci; i += 1) {
          backConvolvePlane(
            paddedGrad,
            o * pp,
            weight.value,
            (o * ci + i) * 9,
            gradIn,
            i * hw,
            h,
            w,
          );
        }
      }
      return gradIn;
    },
  };
}

/** Copies `channels` planes of h x w into the interior of (h+2) x (w+2) planes with zero borders. */
function pad(x: Float64Array, padded: Float64Array, channels: number, h: number, w: number): void {
  const pw = w + 2;
  const pp = (h + 2) * pw;
  for (let c = 0; c < channels; c += 1) {
    for (let y = 0; y < h; y += 1) {
      const from = c * h * w + y * w;
      padded.set(x.subarray(from, from + w), c * pp + (y + 1) * pw + 1);
    }
  }
}

/** out[y][x] += sum over ky, kx (in that order) of k[ky][kx] * in[y + ky - 1][x + kx - 1]. */
function convolvePlane(
  p: Float64Array,
  src: number,
  k: Float64Array,
  kb: number,
  out: Float64Array,
  dst: number,
  h: number,
  w: number,
): void {
  const pw = w + 2;
  const k0 = k[kb]!;
  const k1 = k[kb + 1]!;
  const k2 = k[kb + 2]!;
  const k3 = k[kb + 3]!;
  const k4 = k[kb + 4]!;
  const k5 = k[kb + 5]!;
  const k6 = k[kb + 6]!;
  const k7 = k[kb + 7]!;
  const k8 = k[kb + 8]!;
  for (let y = 0; y < h; y += 1) {
    const r0 = src + y * pw;
    const r1 = r0 + pw;
    const r2 = r1 + pw;
    const row = dst + y * w;
    // A 3x3 window sliding right: each step loads one new column of three values.
    let a0 = p[r0]!;
    let a1 = p[r0 + 1]!;
    let b0 = p[r1]!;
    let b1 = p[r1 + 1]!;
    let c0 = p[r2]!;
    let c1 = p[r2 + 1]!;
    for (let x = 0; x < w; x += 1) {
      const a2 = p[r0 + x + 2]!;
      const b2 = p[r1 + x + 2]!;
      const c2 = p[r2 + x + 2]!;
      let s = out[row + x]!;
      s += k0 * a0;
      s += k1 * a1;
      s += k2 * a2;
      s += k3 * b0;
      s += k4 * b1;
      s += k5 * b2;
      s += k6 * c0;
      s += k7 * c1;
      s += k8 * c2;
      out[row + x] = s;
      a0 = a1;
      a1 = a2;
      b0 = b1;
      b1 = b2;
      c0 = c1;
      c1 = c2;
    }
  }
}

/** grad k[ky][kx] += sum over y, x (row-major) of gradOut[y][x] * in[y + ky - 1][x + kx - 1]. */
function kernelGradient(
  g: Float64Array,
  gb: number,
  p: Float64Array,
  src: number,
  kg: Float64Array,
  kb: number,
  h: number,
  w: number,
): void {
  const pw = w + 2;
  let g0 = 0;
  let g1 = 0;
  let g2 = 0;
  let g3 = 0;
  let g4 = 0;
  let g5 = 0;
  let g6 = 0;
  let g7 = 0;
  let g8 = 0;
  for (let y = 0; y < h; y += 1) {
    const r0 = src + y * pw;
    const r1 = r0 + pw;
    const r2 = r1 + pw;
    const row = gb + y * w;
    let a0 = p[r0]!;
    let a1 = p[r0 + 1]!;
    let b0 = p[r1]!;
    let b1 = p[r1 + 1]!;
    let c0 = p[r2]!;
    let c1 = p[r2 + 1]!;
    for (let x = 0; x < w; x += 1) {
      const a2 = p[r0 + x + 2]!;
      const b2 = p[r1 + x + 2]!;
      const c2 = p[r2 + x + 2]!;
      const v = g[row + x]!;
      g0 += v * a0;
      g1 += v * a1;
      g2 += v * a2;
      g3 += v * b0;
      g4 += v * b1;
      g5 += v * b2;
      g6 += v * c0;
      g7 += v * c1;
      g8 += v * c2;
      a0 = a1;
      a1 = a2;
      b0 = b1;
      b1 = b2;
      c0 = c1;
      c1 = c2;
    }
  }
  kg[kb]! += g0;
  kg[kb + 1]! += g1;
  kg[kb + 2]! += g2;
  kg[kb + 3]! += g3;
  kg[kb + 4]! += g4;
  kg[kb + 5]! += g5;
  kg[kb + 6]! += g6;
  kg[kb + 7]! += g7;
  kg[kb + 8]! += g8;
}

/**
 * gradIn[y][x] += sum over ky, kx (in that order) of k[ky][kx] * gradOut[y - ky + 1][x - kx + 1]:
 * the transposed convolution, gathered per input pixel so each sum keeps the order above.
 */
function backConvolvePlane(
  gp: Float64Array,
  src: number,
  k: Float64Array,
  kb: number,
  gradIn: Float64Array,
  dst: number,
  h: number,
  w: number,
): void {
  const pw = w + 2;
  const k0 = k[kb]!;
  const k1 = k[kb + 1]!;
  const k2 = k[kb + 2]!;
  const k3 = k[kb + 3]!;
  const k4 = k[kb + 4]!;
  const k5 = k[kb + 5]!;
  const k6 = k[kb + 6]!;
  const k7 = k[kb + 7]!;
  const k8 = k[kb + 8]!;
  for (let y = 0; y < h; y += 1) {
    // Padded row y + 2 holds gradOut row y + 1 (ky = 0); row y holds gradOut row y - 1 (ky = 2).
    const r0 = src + (y + 2) * pw;
    const r1 = r0 - pw;
    const r2 = r1 - pw;
    const row = dst + y * w;
    let a0 = gp[r0]!;
    let a1 = gp[r0 + 1]!;
    let b0 = gp[r1]!;
    let b1 = gp[r1 + 1]!;
    let c0 = gp[r2]!;
    let c1 = gp[r2 + 1]!;
    for (let x = 0; x < w; x += 1) {
      const a2 = gp[r0 + x + 2]!;
      const b2 = gp[r1 + x + 2]!;
      const c2 = gp[r2 + x + 2]!;
      let s = gradIn[row + x]!;
      s += k0 * a2;
      s += k1 * a1;
      s += k2 * a0;
      s += k3 * b2;
      s += k4 * b1;
      s += k5 * b0;
      s += k6 * c2;
      s += k7 * c1;
      s += k8 * c0;
      gradIn[row + x] = s;
      a0 = a1;
      a1 = a2;
      b0 = b1;
      b1 = b2;
      c0 = c1;
      c1 = c2;
    }
  }
}

/**
 * 1x1 convolution (a dense layer applied at every pixel): how a detector turns its last feature
 * map into per-cell predictions without flattening away the grid. Weights [out][in] (ONNX Conv's
 * [out][in][1][1]).
 */
function conv1x1(inShape: Shape, outChannels: number, index: number): Layer {
  const [ci, h, w] = inShape as [number, number, number];
  const co = outChannels;
  const hw = h * w;
  const weight = parameter(`conv${index}.weight`, co * ci);
  const bias = parameter(`conv${index}.bias`, co);
  const out = new Float64Array(co * hw);
  const gradIn = new Float64Array(ci * hw);
  let input: Float64Array = new Float64Array(0);
  return {
    spec: { type: 'conv1x1', outChannels },
    inShape,
    outShape: [co, h, w],
    params: [weight, bias],
    macs: co * ci * hw,
    forward(x) {
      input = x;
      const wv = weight.value;
      for (let o = 0; o < co; o += 1) {
        const plane = o * hw;
        out.fill(bias.value[o]!, plane, plane + hw);
        for (let i = 0; i < ci; i += 1) {
          const k = wv[o * ci + i]!;
          const src = i * hw;
          for (let p = 0; p < hw; p += 1) out[plane + p]! += k * x[src + p]!;
        }
      }
      return out;
    },
    backward(gradOut) {
      gradIn.fill(0);
      const wv = weight.value;
      const wg = weight.grad;
      for (let o = 0; o < co; o += 1) {
        const plane = o * hw;
        let gb = 0;
        for (let p = plane; p < plane + hw; p += 1) gb += gradOut[p]!;
        bias.grad[o]! += gb;
        for (let i = 0; i < ci; i += 1) {
          const k = wv[o * ci + i]!;
          const src = i * hw;
          let gk = 0;
          for (let p = 0; p < hw; p += 1) {
            const g = gradOut[plane + p]!;
            gk += g * input[src + p]!;
            gradIn[src + p]! += g * k;
          }
          wg[o * ci + i]! += gk;
        }
      }
      return gradIn;
    },
  };
}

/** Fully connected; weights [in][out] (ONNX Gemm's B without transposition). */
function dense(inShape: Shape, units: number, index: number): Layer {
  const n = size(inShape);
  const weight = parameter(`dense${index}.weight`, n * units);
  const bias = parameter(`dense${index}.bias`, units);
  const out = new Float64Array(units);
  const gradIn = new Float64Array(n);
  let input: Float64Array = new Float64Array(0);
  return {
    spec: { type: 'dense', units },
    inShape,
    outShape: [units],
    params: [weight, bias],
    macs: n * units,
    forward(x) {
      input = x;
      out.set(bias.value);
      const wv = weight.value;
      for (let i = 0; i < n; i += 1) {
        const xi = x[i]!;
        if (xi === 0) continue;
        const row = i * units;
        for (let j = 0; j < units; j += 1) out[j]! += xi * wv[row + j]!;
      }
      return out;
    },
    backward(gradOut, inputGradient = true) {
      const wv = weight.value;
      const wg = weight.grad;
      for (let j = 0; j < units; j += 1) bias.grad[j]! += gradOut[j]!;
      if (!inputGradient) {
        // Weight gradients only; a zero input adds nothing to its row (sparse states are common).
        for (let i = 0; i < n; i += 1) {
          const xi = input[i]!;
          if (xi === 0) continue;
          const row = i * units;
          for (let j = 0; j < units; j += 1) wg[row + j]! += xi * gradOut[j]!;
        }
        return gradIn;
      }
      for (let i = 0; i < n; i += 1) {
        const xi = input[i]!;
        const row = i * units;
        let g = 0;
        for (let j = 0; j < units; j += 1) {
          const go = gradOut[j]!;
          wg[row + j]! += xi * go;
          g += wv[row + j]! * go;
        }
        gradIn[i] = g;
      }
      return gradIn;
    },
  };
}

function relu(inShape: Shape): Layer {
  const out = new Float64Array(size(inShape));
  const gradIn = new Float64Array(out.length);
  return {
    spec: { type: 'relu' },
    inShape,
    outShape: inShape,
    params: [],
    macs: 0,
    forward(x) {
      for (let i = 0; i < out.length; i += 1) out[i] = x[i]! > 0 ? x[i]! : 0;
      return out;
    },
    backward(gradOut) {
      for (let i = 0; i < out.length; i += 1) gradIn[i] = out[i]! > 0 ? gradOut[i]! : 0;
      return gradIn;
    },
  };
}

function flatten(inShape: Shape): Layer {
  return {
    spec: { type: 'flatten' },
    inShape,
    outShape: [size(inShape)],
    params: [],
    macs: 0,
    forward: (x) => x,
    backward: (g) => g,
  };
}

/**
 * A sequential network; `forward` returns class probabilities (softmax of the last layer),
 * `logits` the last layer's raw outputs (Q-values for the DQN).
 */
class Network {
  readonly layers: Layer[] = [];
  readonly inShape: Shape;
  readonly #probabilities: Float64Array;
  /** The current sample, as doubles: reused so a forward pass allocates nothing. */
  readonly #input: Float64Array;
  readonly #gradOutput: Float64Array;

  constructor(inShape: Shape, specs: readonly LayerSpec[]) {
    this.inShape = inShape;
    let shape = inShape;
    let convs = 0;
    let denses = 0;
    for (const spec of specs) {
      let layer: Layer;
      if (spec.type === 'avgpool2') layer = pool(shape, 'avg');
      else if (spec.type === 'maxpool2') layer = pool(shape, 'max');
      else if (spec.type === 'conv3x3') layer = conv3x3(shape, spec.outChannels, (convs += 1));
      else if (spec.type === 'conv1x1') layer = conv1x1(shape, spec.outChannels, (convs += 1));
      else if (spec.type === 'dense') layer = dense(shape, spec.units, (denses += 1));
      else if (spec.type === 'relu') layer = relu(shape);
      else layer = flatten(shape);
      this.layers.push(layer);
      shape = layer.outShape;
    }
    this.#probabilities = new Float64Array(size(shape));
    this.#input = new Float64Array(size(inShape));
    this.#gradOutput = new Float64Array(size(shape));
  }

  /** Features per sample (the product of `inShape`). */
  get inputSize(): number {
    return this.#input.length;
  }

  /** Outputs per sample (classes, or actions for a Q-network). */
  get outputSize(): number {
    return this.#gradOutput.length;
  }

  get specs(): LayerSpec[] {
    return this.layers.map((layer) => layer.spec);
  }

  get params(): Parameter[] {
    return this.layers.flatMap((layer) => layer.params);
  }

  get macs(): number {
    return this.layers.reduce((sum, layer) => sum + layer.macs, 0);
  }

  /** He-normal weights, zero biases. */
  initialize(uniform: () => number): void {
    const gauss = normal(uniform);
    for (const layer of this.layers) {
      const [weight] = layer.params;
      if (weight === undefined) continue;
      const fanIn =
        layer.spec.type === 'conv3x3'
          ? layer.inShape[0]! * 9
          : layer.spec.type === 'conv1x1'
            ? layer.inShape[0]!
            : size(layer.inShape);
      const scale = Math.sqrt(2 / fanIn);
      for (let i = 0; i < weight.value.length; i += 1) weight.value[i] = gauss() * scale;
    }
  }

  /**
   * The last layer's raw outputs for one sample (a view reused by the next call), keeping what
   * `backpropagate` needs: for losses that are not softmax cross-entropy, such as a Q-network's
   * TD error.
   */
  logits(input: ArrayLike<number>): Float64Array {
    const x0 = this.#input;
    if (input.length !== x0.length) {
      throw new Error(`input has ${input.length} features, the network takes ${x0.length}`);
    }
    x0.set(input);
    let x: Float64Array = x0;
    for (const layer of this.layers) x = layer.forward(x);
    return x;
  }

  /** Class probabilities for one sample (a view reused by the next call). */
  forward(input: ArrayLike<number>): Float64Array {
    const x = this.logits(input);
    const p = this.#probabilities;
    let max = -Infinity;
    for (const v of x) max = Math.max(max, v);
    let sum = 0;
    for (let i = 0; i < x.length; i += 1) sum += p[i] = Math.exp(x[i]! - max);
    for (let i = 0; i < x.length; i += 1) p[i]! /= sum;
    return p;
  }

  /** Forward and backward for one labelled sample; returns its cross-entropy loss. */
  learn(input: ArrayLike<number>, label: number): number {
    const p = this.forward(input);
    const grad = Float64Array.from(p);
    grad[label]! -= 1;
    let g: Float64Array = grad;
    for (let i = this.layers.length - 1; i >= 0; i -= 1) g = this.layers[i]!.backward(g);
    return -Math.log(Math.max(p[label]!, 1e-300));
  }

  /**
   * Adds to the parameter gradients d(loss)/d(parameters) for the sample of the latest `logits`
   * (or `forward`) call, given `gradOutput` = d(loss)/d(logits): any loss on the raw outputs
   * then trains with the same layers. Call it before the next forward pass, which overwrites the
   * kept activations. The pass stops at the first layer with parameters, without its input's
   * gradient: nothing reads it (a flatten or pooling below has nothing to learn), and for a wide
   * first dense layer it is most of the backward pass.
   */
  backpropagate(gradOutput: ArrayLike<number>): void {
    const g0 = this.#gradOutput;
    if (gradOutput.length !== g0.length) {
      throw new Error(`gradient has ${gradOutput.length} outputs, the network gives ${g0.length}`);
    }
    g0.set(gradOutput);
    let g: Float64Array = g0;
    const first = Math.max(
      0,
      this.layers.findIndex((layer) => layer.params.length > 0),
    );
    for (let i = this.layers.length - 1; i >= first; i -= 1) {
      g = this.layers[i]!.backward(g, i > first);
    }
  }

  zeroGrad(): void {
    for (const param of this.params) param.grad.fill(0);
  }

  /** Every parameter value in `params` order, copied: a checkpoint, or a hash of the weights. */
  getParameters(): Float64Array {
    const params = this.params;
    const out = new Float64Array(params.reduce((n, p) => n + p.value.length, 0));
    let offset = 0;
    for (const p of params) {
      out.set(p.value, offset);
      offset += p.value.length;
    }
    return out;
  }

  /** Restores values written by `getParameters` on a network of the same architecture. */
  setParameters(values: ArrayLike<number>): void {
    const params = this.params;
    const total = params.reduce((n, p) => n + p.value.length, 0);
    if (values.length !== total) {
      throw new Error(`${values.length} parameter values for a network with ${total}`);
    }
    const all = Float64Array.from(values);
    let offset = 0;
    for (const p of params) {
      p.value.set(all.subarray(offset, offset + p.value.length));
      offset += p.value.length;
    }
  }

  /**
   * Copies `source`'s parameter values into this network (same input shape and layers): how a
   * DQN freezes its target network without allocating a new one each episode.
   */
  copyFrom(source: Network): void {
    if (
      JSON.stringify(source.inShape) !== JSON.stringify(this.inShape) ||
      JSON.stringify(source.specs) !== JSON.stringify(this.specs)
    ) {
      throw new Error('copyFrom: the networks differ in input shape or layers');
    }
    const mine = this.params;
    source.params.forEach((p, k) => mine[k]!.value.set(p.value));
  }

  /** A new network with the same architecture and a copy of the parameter values. */
  clone(): Network {
    const copy = new Network(this.inShape, this.specs);
    copy.copyFrom(this);
    return copy;
  }
}

/** Adam (Kingma & Ba) over a network's parameters; gradients are averaged over `batch`. */
class Adam {
  #step = 0;
  readonly #m: Float64Array[];
  readonly #v: Float64Array[];

  constructor(
    private readonly params: readonly Parameter[],
    private rate: number,
    private readonly beta1 = 0.9,
    private readonly beta2 = 0.999,
    private readonly epsilon = 1e-8,
  ) {
    this.#m = params.map((p) => new Float64Array(p.value.length));
    this.#v = params.map((p) => new Float64Array(p.value.length));
  }

  /** Changes the learning rate from the next step on: for a schedule that decays it. */
  setRate(rate: number): void {
    this.rate = rate;
  }

  step(batch: number): void {
    this.#step += 1;
    const c1 = 1 - this.beta1 ** this.#step;
    const c2 = 1 - this.beta2 ** this.#step;
    this.params.forEach((param, k) => {
      const m = this.#m[k]!;
      const v = this.#v[k]!;
      for (let i = 0; i < param.value.length; i += 1) {
        const g = param.grad[i]! / batch;
        m[i] = this.beta1 * m[i]! + (1 - this.beta1) * g;
        v[i] = this.beta2 * v[i]! + (1 - this.beta2) * g * g;
        param.value[i]! -= (this.rate * (m[i]! / c1)) / (Math.sqrt(v[i]! / c2) + this.epsilon);
      }
    });
  }
}

export { Network, Adam };
export type { LayerSpec, Layer, Parameter, Shape };
