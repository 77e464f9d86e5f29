/**
 * The ASET meta-policy learner (paper section IV-A/C, Algorithm 1): a Deep Q-Network that picks
 * one of the static scheduling policies every T seconds from the state vector. Generic over the
 * state size and the number of actions; the simulator, the state encoding and the reward are
 * the caller's.
 *
 * Algorithm 1 line by line:
 * - line 1: `ReplayBuffer`, a ring of N_r transitions with circular replacement (line 11), and
 *   phi_0, He-initialised from the seed;
 * - line 5: `act`, epsilon-greedy over the online network phi_k, epsilon decaying per episode k
 *   (`epsilonAt`; the paper only says "dynamically updated");
 * - lines 13-19: `finishEpisode`: freeze phi_k as the target, take G Adam steps on minibatches
 *   drawn uniformly from the ring (line 15) against C = r + gamma * max_a' Q(s', a'; phi_k)
 *   (line 16; the paper writes argmax there but means max, the value of the best action, as in
 *   its eq. 10 and Bellman's equation it cites), and keep the result as phi_{k+1}.
 *
 * Input normalisation is the caller's job: the network sees the state exactly as given, and
 * features on wildly different scales (stream counts next to loads in [0, 1]) make the first
 * layer's He initialisation and Adam's step size a poor fit. Scale features to about [0, 1] (or
 * standardise them) before `act` and `remember`. The optional gradient-norm clip and Huber loss
 * keep a badly scaled state or reward from blowing the weights up, but do not make it learn well.
 *
 * Everything is deterministic for a seed: the initial weights, the exploration draws and the
 * minibatch draws come from three seeded generators, and the arithmetic is plain doubles on one
 * thread.
 */
import { Adam, Network } from '../../training/network.js';
import type { LayerSpec, Parameter } from '../../training/network.js';
import { exportOnnx } from '../../training/onnx-export.js';
import { seededRandom } from '../../random/index.js';
import { greedyAction } from '../greedy.js';

/**
 * How epsilon falls from `start` to `end` over the first `episodes` episodes, then stays at
 * `end`. Per episode, because Algorithm 1 fixes pi_k (line 5) once per episode k. `exponential`
 * interpolates geometrically (start * (end / start)^(k / episodes)): most of the exploration
 * goes early, while the Q-values are still noise; `linear` spends it evenly.
 */
interface EpsilonSchedule {
  readonly decay: 'exponential' | 'linear';
  readonly start: number;
  readonly end: number;
  readonly episodes: number;
}

/** Epsilon for episode `episode` (0-based) under `schedule`. */
function epsilonAt(schedule: EpsilonSchedule, episode: number): number {
  const { start, end, episodes } = schedule;
  if (episodes <= 0 || episode >= episodes) return end;
  const progress = Math.max(0, episode) / episodes;
  if (schedule.decay === 'linear') return start + (end - start) * progress;
  return start * (end / start) ** progress;
}

/**
 * The replay memory D of Algorithm 1: a ring of `capacity` transitions (s, a, r, s', terminal),
 * the oldest overwritten first (line 11), sampled uniformly with replacement (line 15). States
 * are stored as float32 in two preallocated blocks: a few thousand features per state times
 * N_r transitions would otherwise be millions of small arrays, and float32 is also what the
 * exported ONNX model reads, so training sees exactly the inputs inference will.
 */
class ReplayBuffer {
  readonly capacity: number;
  readonly stateSize: number;
  readonly #states: Float32Array;
  readonly #nexts: Float32Array;
  readonly #actions: Int32Array;
  readonly #rewards: Float64Array;
  readonly #terminals: Uint8Array;
  /** The push number of the transition each slot holds. */
  readonly #written: Float64Array;
  /** Views of each slot, made once, so reading a transition in the training loop allocates nothing. */
  readonly #stateViews: Float32Array[];
  readonly #nextViews: Float32Array[];
  #pushed = 0;

  constructor(capacity: number, stateSize: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error('capacity must be >= 1');
    if (!Number.isInteger(stateSize) || stateSize < 1) throw new Error('stateSize must be >= 1');
    this.capacity = capacity;
    this.stateSize = stateSize;
    this.#states = new Float32Array(capacity * stateSize);
    this.#nexts = new Float32Array(capacity * stateSize);
    this.#actions = new Int32Array(capacity);
    this.#rewards = new Float64Array(capacity);
    this.#terminals = new Uint8Array(capacity);
    this.#written = new Float64Array(capacity).fill(-1);
    const view = (block: Float32Array, slot: number) =>
      block.subarray(slot * stateSize, (slot + 1) * stateSize);
    this.#stateViews = Array.from({ length: capacity }, (_, slot) => view(this.#states, slot));
    this.#nextViews = Array.from({ length: capacity }, (_, slot) => view(this.#nexts, slot));
  }

  /** Transitions held: grows to `capacity`, then stays there. */
  get size(): number {
    return Math.min(this.#pushed, this.capacity);
  }

  /** Transitions ever pushed, including those since overwritten. */
  get pushed(): number {
    return this.#pushed;
  }

  /**
   * Stores a transition in the next slot, overwriting the oldest once full; returns the slot.
   * `terminal` marks s' as the end of the episode, so its target is r alone.
   */
  push(
    state: ArrayLike<number>,
    action: number,
    reward: number,
    next: ArrayLike<number>,
    terminal: boolean,
  ): number {
    if (state.length !== this.stateSize || next.length !== this.stateSize) {
      throw new Error(`states must have ${this.stateSize} features`);
    }
    if (!Number.isFinite(reward)) throw new Error(`reward must be finite, got ${reward}`);
    const slot = this.#pushed % this.capacity;
    this.#stateViews[slot]!.set(state);
    this.#nextViews[slot]!.set(next);
    this.#actions[slot] = action;
    this.#rewards[slot] = reward;
    this.#terminals[slot] = terminal ? 1 : 0;
    this.#written[slot] = this.#pushed;
    this.#pushed += 1;
    return slot;
  }

  /**
   * Fills `out` with slots drawn uniformly, with replacement, from the transitions held (the
   * paper's idx ~ U(N_r), over the filled part until the ring is full). Throws when empty.
   */
  sample(out: Int32Array, uniform: () => number): Int32Array {
    const n = this.size;
    if (n === 0) throw new Error('cannot sample an empty replay buffer');
    for (let i = 0; i < out.length; i += 1) out[i] = Math.floor(uniform() * n);
    return out;
  }

  /** s of the transition in `slot` (a view into the ring, overwritten when the slot is). */
  state(slot: number): Float32Array {
    return this.#stateViews[slot]!;
  }

  /** s' of the transition in `slot` (a view into the ring). */
  next(slot: number): Float32Array {
    return this.#nextViews[slot]!;
  }

  action(slot: number): number {
    return this.#actions[slot]!;
  }

  reward(slot: number): number {
    return this.#rewards[slot]!;
  }

  terminal(slot: number): boolean {
    return this.#terminals[slot] === 1;
  }

  /** Which transition `slot` holds: its 0-based push number, -1 if never written. */
  written(slot: number): number {
    return this.#written[slot]!;
  }
}

/**
 * The Q-network's layers: an MLP, state -> `hidden` ReLU layers -> one linear output per action.
 *
 * Why not the paper's three 4x4 convolutions over (time x features) with max-pooling: our
 * trainer (shared/training/network.ts) has 3x3 "same" convolutions only, and it trains in plain
 * JavaScript on two shared CPU cores within a budget of about 20 minutes per topology, where
 * convolutions over a [T x |W| x F] tensor cost many times the multiply-adds of a dense layer
 * of the same input. The state is small (a few thousand floats), and its time dimension is
 * short (a handful of samples per window), so the temporal receptive field a conv stack builds
 * up over several layers is one the first dense layer already has: every hidden unit sees every
 * (time, worker, feature) cell. What the MLP gives up is weight sharing across workers and time
 * (a conv's translation invariance), so it needs more data to learn the same pattern at
 * different workers; it is a substitution for budget reasons, not a claim of equivalence.
 */
function qNetworkLayers(actions: number, hidden: readonly number[] = [128, 64]): LayerSpec[] {
  const layers: LayerSpec[] = [];
  for (const units of hidden) layers.push({ type: 'dense', units }, { type: 'relu' });
  layers.push({ type: 'dense', units: actions });
  return layers;
}

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
    let q = 0;
    if (pair) {
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
    } else {
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
 * rounding; test/shared/aset/learn/dqn.test.ts checks its gradient against central differences of
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

/** Knobs of Algorithm 1. The paper gives no values; the defaults are common DQN choices. */
interface DqnOptions {
  /** d, features per state (the flattened [T x |W| x F] tensor). */
  readonly stateSize: number;
  /** |A|, the static policies to choose from (7 in the paper). */
  readonly actions: number;
  /** Hidden layer widths; default [128, 64]. */
  readonly hidden?: readonly number[];
  /** gamma, the discount of eq. 7; default 0.99. */
  readonly gamma?: number;
  /** alpha, Adam's learning rate; default 1e-3. */
  readonly learningRate?: number;
  /**
   * Adam's epsilon; default 3.125e-4 (0.01 / 32, Dopamine's and Rainbow's DQN setting) rather
   * than the usual 1e-8. When the TD errors get tiny, Adam's per-weight step
   * lr * m / (sqrt(v) + epsilon) stays about lr, an effective learning rate that grows as the
   * gradient shrinks, up to lr / epsilon; past the stable rate the loss climbs back
   * exponentially. Seen on the deterministic toy problems in the tests once the loss reached
   * 1e-30: a larger epsilon lowers that ceiling and postpones the blow-up (it does not remove
   * it). Noisy rewards, as a simulator gives, keep the gradients out of that regime.
   */
  readonly adamEpsilon?: number;
  /** |B|, transitions per gradient step; default 32. */
  readonly batchSize?: number;
  /** G, gradient steps per episode (lines 14-18); default 50. */
  readonly gradientSteps?: number;
  /** N_r, the replay ring's size; default 10,000. */
  readonly replayCapacity?: number;
  /** No training until the ring holds this many transitions; default `batchSize`. */
  readonly minReplay?: number;
  /** Default: exponential from 1.0 to 0.05 over 100 episodes. */
  readonly epsilon?: EpsilonSchedule;
  /**
   * `squared` (default): the paper's L = sum_i (C_i - Q(s_i, a_i))^2 (line 17). `huber`: per
   * transition 0.5 e^2 for |e| <= huberDelta, huberDelta * (|e| - 0.5 huberDelta) beyond, whose
   * gradient is the TD error clipped to +-huberDelta: rare large errors (an episode cut short,
   * a reward spike) then move the weights no more than a moderate one.
   */
  readonly loss?: 'squared' | 'huber';
  /** Default 1. */
  readonly huberDelta?: number;
  /**
   * Rescales a step's gradient (the batch mean) to this L2 norm when it is larger; default off.
   * A guard against a badly scaled input or reward, not a substitute for normalising it.
   */
  readonly maxGradientNorm?: number;
  /**
   * Double DQN (van Hasselt et al., 2016): line 16's max_a' Q(s', a'; phi_k) becomes
   * Q(s', argmax_a' Q(s', a'; phi); phi_k), the action picked by the online network and valued
   * by the frozen one. Default false (the paper's target). The max over noisy estimates is biased
   * upwards, most for the actions seen least; when the true differences between actions are
   * small, as between our static policies, that bias decides the ranking.
   */
  readonly double?: boolean;
  readonly seed: number;
}

/** What one episode's training phase did (lines 13-19). */
interface EpisodeReport {
  /** k, the episode just finished (0-based). */
  readonly episode: number;
  /** Epsilon the episode explored with. */
  readonly epsilon: number;
  /** Gradient steps taken: G, or 0 while the ring holds fewer than `minReplay` transitions. */
  readonly gradientSteps: number;
  /** Mean loss per transition over those steps (NaN when none). */
  readonly loss: number;
}

/**
 * The agent of Algorithm 1. Use: per episode, for each step `act(s)`, run the chosen policy for
 * T seconds, `remember(s, a, r, s', terminal)`; at the episode's end `finishEpisode()`; when
 * done, `exportQNetwork(agent)` for the scheduler. The online network is `network` (phi_k);
 * `target` is the frozen copy the targets C are computed with. Not saved: Adam's moments and
 * the episode count (resume from `network.getParameters()` restarts both).
 */
class DqnAgent {
  readonly network: Network;
  readonly target: Network;
  readonly replay: ReplayBuffer;
  readonly stateSize: number;
  readonly actions: number;
  readonly gamma: number;
  readonly batchSize: number;
  readonly gradientSteps: number;
  readonly minReplay: number;
  readonly schedule: EpsilonSchedule;
  readonly loss: 'squared' | 'huber';
  readonly huberDelta: number;
  readonly maxGradientNorm: number | undefined;
  readonly double: boolean;
  readonly #optimizer: Adam;
  readonly #explore: () => number;
  readonly #draw: () => number;
  readonly #slots: Int32Array;
  readonly #online: BatchedMlp;
  readonly #frozen: BatchedMlp;
  /** Per batch row: its target C; the rows whose s' the target network runs on; d L / d Q. */
  readonly #targets: Float64Array;
  readonly #pending: Int32Array;
  readonly #nextActions: Int32Array;
  readonly #gradOutput: Float64Array;
  #episode = 0;
  #steps = 0;

  constructor(options: DqnOptions) {
    const positiveInt = (value: number, what: string) => {
      if (!Number.isInteger(value) || value < 1) throw new Error(`${what} must be an integer >= 1`);
      return value;
    };
    this.stateSize = positiveInt(options.stateSize, 'stateSize');
    this.actions = positiveInt(options.actions, 'actions');
    this.gamma = options.gamma ?? 0.99;
    if (!(this.gamma >= 0 && this.gamma <= 1)) throw new Error('gamma must be in [0, 1]');
    this.batchSize = positiveInt(options.batchSize ?? 32, 'batchSize');
    this.gradientSteps = positiveInt(options.gradientSteps ?? 50, 'gradientSteps');
    this.minReplay = positiveInt(options.minReplay ?? this.batchSize, 'minReplay');
    this.schedule = options.epsilon ?? {
      decay: 'exponential',
      start: 1,
      end: 0.05,
      episodes: 100,
    };
    if (
      this.schedule.decay === 'exponential' &&
      !(this.schedule.start > 0 && this.schedule.end > 0)
    )
      throw new Error('an exponential epsilon schedule needs start and end > 0');
    this.loss = options.loss ?? 'squared';
    this.huberDelta = options.huberDelta ?? 1;
    if (!(this.huberDelta > 0)) throw new Error('huberDelta must be > 0');
    this.maxGradientNorm = options.maxGradientNorm;
    this.double = options.double ?? false;
    if (this.maxGradientNorm !== undefined && !(this.maxGradientNorm > 0))
      throw new Error('maxGradientNorm must be > 0');
    const capacity = positiveInt(options.replayCapacity ?? 10_000, 'replayCapacity');

    // Three streams, so that changing G or the batch size leaves the exploration draws alone.
    const init = seededRandom(options.seed);
    this.#explore = seededRandom(options.seed + 0x51ed27);
    this.#draw = seededRandom(options.seed + 0x2c1b3c6d);
    this.network = new Network([this.stateSize], qNetworkLayers(this.actions, options.hidden));
    this.network.initialize(init);
    this.target = this.network.clone();
    this.#optimizer = new Adam(
      this.network.params,
      options.learningRate ?? 1e-3,
      0.9,
      0.999,
      options.adamEpsilon ?? 3.125e-4,
    );
    this.replay = new ReplayBuffer(capacity, this.stateSize);
    this.#slots = new Int32Array(this.batchSize);
    this.#online = new BatchedMlp(this.network, this.batchSize);
    this.#frozen = new BatchedMlp(this.target, this.batchSize);
    this.#targets = new Float64Array(this.batchSize);
    this.#pending = new Int32Array(this.batchSize);
    this.#nextActions = new Int32Array(this.batchSize);
    this.#gradOutput = new Float64Array(this.batchSize * this.actions);
  }

  /** k, episodes finished so far (the next `finishEpisode` reports this one). */
  get episode(): number {
    return this.#episode;
  }

  /** Gradient steps taken so far, all episodes. */
  get steps(): number {
    return this.#steps;
  }

  /** Epsilon of the current episode. */
  get epsilon(): number {
    return epsilonAt(this.schedule, this.#episode);
  }

  /** Q(s, .; phi_k) from the online network (a view reused by the next call on it). */
  qValues(state: ArrayLike<number>): Float64Array {
    return this.network.logits(state);
  }

  /** The greedy action argmax_a Q(s, a; phi_k): what the trained policy does when deployed. */
  greedy(state: ArrayLike<number>): number {
    return greedyAction(this.network.logits(state));
  }

  /**
   * Line 7: a ~ pi_k(a|s) = epsilon U(A) + (1 - epsilon) delta(argmax Q). The uniform draw
   * covers every action, the greedy one included, as the paper's mixture does.
   */
  act(state: ArrayLike<number>): number {
    if (this.#explore() < this.epsilon) {
      return Math.min(this.actions - 1, Math.floor(this.#explore() * this.actions));
    }
    return this.greedy(state);
  }

  /**
   * Line 11: stores (s, a, r, s') in the ring; `terminal` when the episode ended at s', so that
   * its target is r alone. The paper ends an episode when the success rate falls to theta or at
   * the timeout H; marking the timeout terminal too is the paper's reading, while passing false
   * there (bootstrapping past a time limit that is not part of the task) is the textbook one.
   * The caller chooses; the states are stored as float32.
   */
  remember(
    state: ArrayLike<number>,
    action: number,
    reward: number,
    next: ArrayLike<number>,
    terminal: boolean,
  ): void {
    if (!Number.isInteger(action) || action < 0 || action >= this.actions) {
      throw new Error(`action must be an integer in [0, ${this.actions}), got ${action}`);
    }
    this.replay.push(state, action, reward, next, terminal);
  }

  /** Line 13: phi_{k,0} <- phi_k, and the targets C use this frozen copy from now on. */
  syncTarget(): void {
    this.target.copyFrom(this.network);
  }

  /**
   * Lines 13-19 for the episode just played: freeze the target, take G gradient steps (none
   * while the ring holds fewer than `minReplay` transitions), keep the result as phi_{k+1}, and
   * move on to episode k + 1 (which lowers epsilon).
   */
  finishEpisode(): EpisodeReport {
    const episode = this.#episode;
    const epsilon = this.epsilon;
    let steps = 0;
    let loss = 0;
    if (this.replay.size >= this.minReplay) {
      this.syncTarget();
      for (let g = 0; g < this.gradientSteps; g += 1) {
        loss += this.trainStep();
        steps += 1;
      }
    }
    this.#episode += 1;
    return { episode, epsilon, gradientSteps: steps, loss: steps > 0 ? loss / steps : NaN };
  }

  /**
   * Lines 15-18 once, against the current target: draw a minibatch, accumulate the TD loss
   * gradient, optionally clip it, take an Adam step. Returns the mean loss per transition.
   * Adam divides the summed gradient by the batch size: Adam is invariant to a constant scale
   * of the loss (up to its epsilon), so this is the paper's summed loss with a step size, and a
   * gradient-norm limit, that do not depend on the batch size.
   */
  trainStep(): number {
    const slots = this.replay.sample(this.#slots, this.#draw);
    const loss = this.accumulateGradients(slots);
    const batch = slots.length;
    if (this.maxGradientNorm !== undefined) {
      let squares = 0;
      for (const p of this.network.params) {
        const grad = p.grad;
        for (let i = 0; i < grad.length; i += 1) squares += grad[i]! * grad[i]!;
      }
      const norm = Math.sqrt(squares) / batch;
      if (norm > this.maxGradientNorm) {
        const scale = this.maxGradientNorm / norm;
        for (const p of this.network.params)
          for (let i = 0; i < p.grad.length; i += 1) p.grad[i]! *= scale;
      }
    }
    this.#optimizer.step(batch);
    this.#steps += 1;
    return loss / batch;
  }

  /**
   * Zeroes the online network's gradients, then adds d L / d phi for the transitions in
   * `slots` (any number; a batch at a time), L being the summed loss of line 17 or its Huber
   * form; returns L. Public so that a test can check it against central differences of
   * `tdLoss`, which computes the same loss sample by sample through Network.logits.
   */
  accumulateGradients(slots: ArrayLike<number>): number {
    this.network.zeroGrad();
    let total = 0;
    for (let start = 0; start < slots.length; start += this.batchSize) {
      total += this.#accumulateChunk(slots, start, Math.min(slots.length, start + this.batchSize));
    }
    return total;
  }

  #accumulateChunk(slots: ArrayLike<number>, start: number, end: number): number {
    const replay = this.replay;
    const rows = end - start;
    const targets = this.#targets;
    const actions = this.actions;
    // Line 16: C = r, plus gamma max_a' Q(s', a'; phi_k) unless s' is terminal: the frozen
    // network runs on the non-terminal next states only.
    let pending = 0;
    for (let r = 0; r < rows; r += 1) {
      const slot = slots[start + r]!;
      targets[r] = replay.reward(slot);
      if (replay.terminal(slot)) continue;
      this.#frozen.setInput(pending, replay.next(slot));
      this.#pending[pending] = r;
      pending += 1;
    }
    if (pending > 0) {
      // Double DQN: the online network picks a' on s' (its buffer is refilled with s below).
      const picked = this.#nextActions;
      if (this.double) {
        for (let p = 0; p < pending; p += 1) {
          this.#online.setInput(p, replay.next(slots[start + this.#pending[p]!]!));
        }
        const online = this.#online.forward(pending);
        for (let p = 0; p < pending; p += 1) {
          picked[p] = greedyAction(online.subarray(p * actions, (p + 1) * actions));
        }
      }
      const q = this.#frozen.forward(pending);
      for (let p = 0; p < pending; p += 1) {
        let best = q[p * actions]!;
        if (this.double) best = q[p * actions + picked[p]!]!;
        else for (let a = 1; a < actions; a += 1) best = Math.max(best, q[p * actions + a]!);
        targets[this.#pending[p]!]! += this.gamma * best;
      }
    }
    // Lines 17-18: the loss touches only Q(s_i, a_i), so d L / d Q is zero but for a_i.
    for (let r = 0; r < rows; r += 1) this.#online.setInput(r, replay.state(slots[start + r]!));
    const q = this.#online.forward(rows);
    const grad = this.#gradOutput;
    grad.fill(0);
    let total = 0;
    for (let r = 0; r < rows; r += 1) {
      const slot = slots[start + r]!;
      const at = r * actions + replay.action(slot);
      const error = q[at]! - targets[r]!;
      total += this.#lossOf(error);
      grad[at] = this.#lossGradient(error);
    }
    this.#online.backward(grad, rows);
    return total;
  }

  #lossOf(error: number): number {
    if (this.loss === 'squared') return error * error;
    const abs = Math.abs(error);
    const delta = this.huberDelta;
    return abs <= delta ? 0.5 * error * error : delta * (abs - 0.5 * delta);
  }

  #lossGradient(error: number): number {
    if (this.loss === 'squared') return 2 * error;
    return Math.max(-this.huberDelta, Math.min(this.huberDelta, error));
  }

  /**
   * L over `slots`, sample by sample through Network.logits and without touching gradients:
   * the independent reference `accumulateGradients` is checked against.
   */
  tdLoss(slots: ArrayLike<number>): number {
    const replay = this.replay;
    let total = 0;
    for (let i = 0; i < slots.length; i += 1) {
      const slot = slots[i]!;
      let c = replay.reward(slot);
      if (!replay.terminal(slot)) {
        const next = this.target.logits(replay.next(slot));
        const picked = this.double
          ? greedyAction(this.network.logits(replay.next(slot)))
          : greedyAction(next);
        c += this.gamma * next[picked]!;
      }
      total += this.#lossOf(this.network.logits(replay.state(slot))[replay.action(slot)]! - c);
    }
    return total;
  }
}

/**
 * The online Q-network as ONNX (opset 13, float32): input `state` [N, d], output `q` [N, |A|],
 * raw Q-values with no softmax, so the scheduler runs it through shared/inference/onnx-runtime.ts
 * and applies `greedyAction` to each row, exactly as the trainer decides.
 */
function exportQNetwork(
  source: DqnAgent | Network,
  name = 'aset-dqn',
  docString = 'ASET DQN meta-policy: Q-values of the static scheduling policies for a state',
): Uint8Array {
  const network = source instanceof DqnAgent ? source.network : source;
  return exportOnnx(network, name, docString, {
    inputName: 'state',
    head: 'identity',
    outputName: 'q',
  });
}

export { DqnAgent, ReplayBuffer, epsilonAt, exportQNetwork, qNetworkLayers };
export type { DqnOptions, EpisodeReport, EpsilonSchedule };
