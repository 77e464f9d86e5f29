/**
 * Minibatch kernels for the DQN's Q-network (dqn.ts): forward and backward passes over an MLP
 * built with shared/training/network.ts, blocked by hand because V8 does not vectorise and the
 * per-sample path of Network spends most of its time streaming the first weight matrix.
 */
import type { Network, Parameter } from '../../../shared/training/network.js';

/** One dense layer of an MLP, seen from the batched kernels; `relu` if a ReLU follows it. */
interface DenseView {
  readonly weight: Parameter;
  readonly bias: Parameter;
  readonly nIn: number;
  readonly nOut: number;
  readonly relu: boolean;
}

/**
 * y[b] = bias + x[b] W for rows b < rows: two samples at a time over four input rows at a time,
 * so each weight loaded serves two samples and each output update four multiply-adds (V8 does
 * not vectorise; this blocking about halved the time on a 3000-wide input). Input rows zero in
 * both samples are skipped.
 */
function denseForward(
  x: Float64Array,
  y: Float64Array,
  layer: DenseView,
  rows: number,
  nz: Int32Array,
): void {
  const { nIn, nOut } = layer;
  const w = layer.weight.value;
  const bias = layer.bias.value;
  let b = 0;
  for (; b < rows; b += 2) {
    const pair = b + 1 < rows;
    const ao = b * nIn;
    const co = pair ? ao + nIn : ao;
    const yo = b * nOut;
    const zo = yo + nOut;
    y.set(bias, yo);
    if (pair) y.set(bias, zo);
    let m = 0;
    for (let i = 0; i < nIn; i += 1) if (x[ao + i] !== 0 || x[co + i] !== 0) nz[m++] = i;
    if (pair) forwardPair(x, y, w, nz, m, ao, co, yo, zo, nOut);
    else forwardSingle(x, y, w, nz, m, ao, yo, nOut);
  }
}

/**
 * `denseForward`'s inner loops for the samples at x offsets `ao` and `co` into y offsets `yo`
 * and `zo`, over the `m` input rows listed in `nz`.
 */
function forwardPair(
  x: Float64Array,
  y: Float64Array,
  w: Float64Array,
  nz: Int32Array,
  m: number,
  ao: number,
  co: number,
  yo: number,
  zo: number,
  nOut: number,
): void {
  let q = 0;
  for (; q + 4 <= m; q += 4) {
    const i0 = nz[q]!;
    const i1 = nz[q + 1]!;
    const i2 = nz[q + 2]!;
    const i3 = nz[q + 3]!;
    const a0 = x[ao + i0]!;
    const a1 = x[ao + i1]!;
    const a2 = x[ao + i2]!;
    const a3 = x[ao + i3]!;
    const c0 = x[co + i0]!;
    const c1 = x[co + i1]!;
    const c2 = x[co + i2]!;
    const c3 = x[co + i3]!;
    const r0 = i0 * nOut;
    const r1 = i1 * nOut;
    const r2 = i2 * nOut;
    const r3 = i3 * nOut;
    for (let j = 0; j < nOut; j += 1) {
      const w0 = w[r0 + j]!;
      const w1 = w[r1 + j]!;
      const w2 = w[r2 + j]!;
      const w3 = w[r3 + j]!;
      y[yo + j]! += a0 * w0 + a1 * w1 + a2 * w2 + a3 * w3;
      y[zo + j]! += c0 * w0 + c1 * w1 + c2 * w2 + c3 * w3;
    }
  }
  for (; q < m; q += 1) {
    const i0 = nz[q]!;
    const a0 = x[ao + i0]!;
    const c0 = x[co + i0]!;
    const r0 = i0 * nOut;
    for (let j = 0; j < nOut; j += 1) {
      const w0 = w[r0 + j]!;
      y[yo + j]! += a0 * w0;
      y[zo + j]! += c0 * w0;
    }
  }
}

/** `denseForward`'s inner loops for the last sample of an odd batch. */
function forwardSingle(
  x: Float64Array,
  y: Float64Array,
  w: Float64Array,
  nz: Int32Array,
  m: number,
  ao: number,
  yo: number,
  nOut: number,
): void {
  let q = 0;
  for (; q + 4 <= m; q += 4) {
    const i0 = nz[q]!;
    const i1 = nz[q + 1]!;
    const i2 = nz[q + 2]!;
    const i3 = nz[q + 3]!;
    const a0 = x[ao + i0]!;
    const a1 = x[ao + i1]!;
    const a2 = x[ao + i2]!;
    const a3 = x[ao + i3]!;
    const r0 = i0 * nOut;
    const r1 = i1 * nOut;
    const r2 = i2 * nOut;
    const r3 = i3 * nOut;
    for (let j = 0; j < nOut; j += 1) {
      y[yo + j]! += a0 * w[r0 + j]! + a1 * w[r1 + j]! + a2 * w[r2 + j]! + a3 * w[r3 + j]!;
    }
  }
  for (; q < m; q += 1) {
    const i0 = nz[q]!;
    const a0 = x[ao + i0]!;
    const r0 = i0 * nOut;
    for (let j = 0; j < nOut; j += 1) y[yo + j]! += a0 * w[r0 + j]!;
  }
}

/**
 * W.grad += sum_b x[b]^T g[b]: two input rows at a time over four samples at a time, samples
 * whose inputs are zero in both rows skipped. The mirror image of `denseForward`'s blocking.
 */
function denseWeightGradient(
  x: Float64Array,
  g: Float64Array,
  layer: DenseView,
  rows: number,
  nz: Int32Array,
): void {
  const { nIn, nOut } = layer;
  const wg = layer.weight.grad;
  for (let i = 0; i < nIn; i += 2) {
    const pair = i + 1 < nIn;
    const i2 = pair ? i + 1 : i;
    let m = 0;
    for (let b = 0; b < rows; b += 1)
      if (x[b * nIn + i] !== 0 || x[b * nIn + i2] !== 0) nz[m++] = b;
    const ra = i * nOut;
    const rc = ra + nOut;
    let q = 0;
    if (pair) {
      for (; q + 4 <= m; q += 4) {
        const b0 = nz[q]! * nIn;
        const b1 = nz[q + 1]! * nIn;
        const b2 = nz[q + 2]! * nIn;
        const b3 = nz[q + 3]! * nIn;
        const a0 = x[b0 + i]!;
        const a1 = x[b1 + i]!;
        const a2 = x[b2 + i]!;
        const a3 = x[b3 + i]!;
        const c0 = x[b0 + i2]!;
        const c1 = x[b1 + i2]!;
        const c2 = x[b2 + i2]!;
        const c3 = x[b3 + i2]!;
        const o0 = nz[q]! * nOut;
        const o1 = nz[q + 1]! * nOut;
        const o2 = nz[q + 2]! * nOut;
        const o3 = nz[q + 3]! * nOut;
        for (let j = 0; j < nOut; j += 1) {
          const g0 = g[o0 + j]!;
          const g1 = g[o1 + j]!;
          const g2 = g[o2 + j]!;
          const g3 = g[o3 + j]!;
          wg[ra + j]! += a0 * g0 + a1 * g1 + a2 * g2 + a3 * g3;
          wg[rc + j]! += c0 * g0 + c1 * g1 + c2 * g2 + c3 * g3;
        }
      }
      for (; q < m; q += 1) {
        const a0 = x[nz[q]! * nIn + i]!;
        const c0 = x[nz[q]! * nIn + i2]!;
        const o0 = nz[q]! * nOut;
        for (let j = 0; j < nOut; j += 1) {
          const g0 = g[o0 + j]!;
          wg[ra + j]! += a0 * g0;
          wg[rc + j]! += c0 * g0;
        }
      }
    } else {
      for (; q < m; q += 1) {
        const a0 = x[nz[q]! * nIn + i]!;
        const o0 = nz[q]! * nOut;
        for (let j = 0; j < nOut; j += 1) wg[ra + j]! += a0 * g[o0 + j]!;
      }
    }
  }
}

/**
 * Minibatch forward and backward passes over a Network that is an MLP (dense layers, each
 * optionally followed by ReLU), reading and updating the Network's own parameters. Why not
 * Network.logits/backpropagate sample by sample: those load and store an output for every
 * multiply-add and stream the whole first weight matrix ([d x 128] doubles, 3 MB for d = 3000)
 * once per sample and pass. Here two samples share each weight load, four input rows share
 * each output update (`denseForward`, `denseWeightGradient`), inputs that are zero are skipped
 * (mostly-empty per-bin rate sums cost nothing), the input's own gradient is never computed,
 * and the target network runs only on non-terminal next states. Measured 2.5-4x the per-sample
 * path's steps per second on [3000] -> 128 -> 64 -> 7 with batch 32 (on a busy 2-core
 * machine). The same sums in a different order, so equal to the per-sample path up to
 * rounding; test/research/aset/learn/dqn.test.ts checks its gradient against central differences of
 * the per-sample loss.
 */
class BatchedMlp {
  readonly capacity: number;
  readonly #layers: DenseView[];
  /** acts[k]: input of layer k, [capacity x nIn]; acts[L]: the outputs. ReLU applied in place. */
  readonly #acts: Float64Array[];
  /** grads[k]: d loss / d acts[k] for k >= 1. */
  readonly #grads: Float64Array[];
  /** Gathered indices (inputs or samples) of the current row or column. */
  readonly #nz: Int32Array;

  constructor(network: Network, capacity: number) {
    if (network.inShape.length !== 1) throw new Error('BatchedMlp: the input must be flat');
    const layers: DenseView[] = [];
    let width = network.inShape[0]!;
    network.layers.forEach((layer, k) => {
      if (layer.spec.type === 'relu' && network.layers[k - 1]?.spec.type === 'dense') return;
      if (layer.spec.type !== 'dense') {
        throw new Error(`BatchedMlp: layer ${k} (${layer.spec.type}) is not dense or ReLU`);
      }
      const [weight, bias] = layer.params as [Parameter, Parameter];
      const relu = network.layers[k + 1]?.spec.type === 'relu';
      layers.push({ weight, bias, nIn: width, nOut: layer.spec.units, relu });
      width = layer.spec.units;
    });
    if (layers.length === 0) throw new Error('BatchedMlp: no dense layer');
    this.capacity = capacity;
    this.#layers = layers;
    this.#acts = [
      new Float64Array(capacity * layers[0]!.nIn),
      ...layers.map((l) => new Float64Array(capacity * l.nOut)),
    ];
    this.#grads = this.#acts.map((a) => new Float64Array(a.length));
    this.#nz = new Int32Array(Math.max(capacity, ...layers.map((l) => l.nIn)));
  }

  /** Puts one sample's features in input row `row` (converted to doubles). */
  setInput(row: number, values: ArrayLike<number>): void {
    this.#acts[0]!.set(values, row * this.#layers[0]!.nIn);
  }

  /** Outputs for input rows [0, rows), row-major [rows x outputs]; kept for `backward`. */
  forward(rows: number): Float64Array {
    this.#layers.forEach((layer, k) => {
      const y = this.#acts[k + 1]!;
      denseForward(this.#acts[k]!, y, layer, rows, this.#nz);
      if (layer.relu) for (let t = 0; t < rows * layer.nOut; t += 1) if (!(y[t]! > 0)) y[t] = 0;
    });
    return this.#acts[this.#layers.length]!;
  }

  /**
   * Adds d loss / d parameters for the rows of the latest `forward`, given `gradOutput` = d loss
   * / d outputs, row-major [rows x outputs] (at most `capacity` rows; values past `rows` are
   * ignored). The input's own gradient is not computed.
   */
  backward(gradOutput: ArrayLike<number>, rows: number): void {
    const last = this.#layers.length;
    this.#grads[last]!.set(gradOutput);
    for (let k = last - 1; k >= 0; k -= 1) {
      const layer = this.#layers[k]!;
      const { nIn, nOut } = layer;
      const x = this.#acts[k]!;
      const y = this.#acts[k + 1]!;
      const g = this.#grads[k + 1]!;
      if (layer.relu) for (let t = 0; t < rows * nOut; t += 1) if (!(y[t]! > 0)) g[t] = 0;
      const bg = layer.bias.grad;
      for (let b = 0; b < rows; b += 1) {
        for (let j = 0; j < nOut; j += 1) bg[j]! += g[b * nOut + j]!;
      }
      denseWeightGradient(x, g, layer, rows, this.#nz);
      const w = layer.weight.value;
      if (k === 0) break;
      // d loss / d input; where the previous ReLU output is 0 its mask zeroes it anyway.
      const gi = this.#grads[k]!;
      const masked = this.#layers[k - 1]!.relu;
      for (let b = 0; b < rows; b += 1) {
        const o = b * nOut;
        for (let i = 0; i < nIn; i += 1) {
          if (masked && x[b * nIn + i] === 0) {
            gi[b * nIn + i] = 0;
            continue;
          }
          const row = i * nOut;
          let sum = 0;
          for (let j = 0; j < nOut; j += 1) sum += w[row + j]! * g[o + j]!;
          gi[b * nIn + i] = sum;
        }
      }
    }
  }
}

export { BatchedMlp };
