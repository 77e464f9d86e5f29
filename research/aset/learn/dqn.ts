/**
 * The ASET meta-policy learner (paper section IV-A/C, Algorithm 1): a Deep Q-Network that picks
 * one of the static scheduling policies every T seconds from the state vector. Generic over the
 * state size and the number of actions; the simulator, the state encoding and the reward are
 * the caller's.
 *
 * Algorithm 1 line by line:
 * - line 1: `ReplayBuffer` (replay-buffer.ts), a ring of N_r transitions with circular
 *   replacement (line 11), and phi_0, He-initialised from the seed;
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
import { Adam, Network } from '../../../shared/training/network.js';
import type { LayerSpec } from '../../../shared/training/network.js';
import { exportOnnx } from '../../../shared/training/onnx-export.js';
import { seededRandom } from '../../../shared/random/index.js';
import { greedyAction } from '../../../shared/aset/greedy.js';
import { BatchedMlp } from './batched-mlp.js';
import { ReplayBuffer } from './replay-buffer.js';

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

const defaultEpsilon: EpsilonSchedule = {
  decay: 'exponential',
  start: 1,
  end: 0.05,
  episodes: 100,
};

function positiveInt(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 1) throw new Error(`${what} must be an integer >= 1`);
  return value;
}

function positive(value: number, what: string): number {
  if (!(value > 0)) throw new Error(`${what} must be > 0`);
  return value;
}

/** Both ends positive for `exponential`: start * (end / start)^p is 0 or NaN once either is 0. */
function checkedSchedule(schedule: EpsilonSchedule): EpsilonSchedule {
  if (schedule.decay === 'exponential' && !(schedule.start > 0 && schedule.end > 0))
    throw new Error('an exponential epsilon schedule needs start and end > 0');
  return schedule;
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
    this.stateSize = positiveInt(options.stateSize, 'stateSize');
    this.actions = positiveInt(options.actions, 'actions');
    this.gamma = options.gamma ?? 0.99;
    if (!(this.gamma >= 0 && this.gamma <= 1)) throw new Error('gamma must be in [0, 1]');
    this.batchSize = positiveInt(options.batchSize ?? 32, 'batchSize');
    this.gradientSteps = positiveInt(options.gradientSteps ?? 50, 'gradientSteps');
    this.minReplay = positiveInt(options.minReplay ?? this.batchSize, 'minReplay');
    this.schedule = checkedSchedule(options.epsilon ?? defaultEpsilon);
    this.loss = options.loss ?? 'squared';
    this.huberDelta = positive(options.huberDelta ?? 1, 'huberDelta');
    this.maxGradientNorm =
      options.maxGradientNorm === undefined
        ? undefined
        : positive(options.maxGradientNorm, 'maxGradientNorm');
    this.double = options.double ?? false;
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
    this.#fillTargets(slots, start, rows);
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

  /**
   * Line 16 for batch rows [0, rows) of the chunk at `start`: C = r, plus gamma max_a'
   * Q(s', a'; phi_k) unless s' is terminal. The frozen network runs on the non-terminal next
   * states only.
   */
  #fillTargets(slots: ArrayLike<number>, start: number, rows: number): void {
    const replay = this.replay;
    const targets = this.#targets;
    const actions = this.actions;
    let pending = 0;
    for (let r = 0; r < rows; r += 1) {
      const slot = slots[start + r]!;
      targets[r] = replay.reward(slot);
      if (replay.terminal(slot)) continue;
      this.#frozen.setInput(pending, replay.next(slot));
      this.#pending[pending] = r;
      pending += 1;
    }
    if (pending === 0) return;
    // Double DQN: the online network picks a' on s' (`#accumulateChunk` then refills it with s).
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

export { DqnAgent, epsilonAt, exportQNetwork, qNetworkLayers };
export type { DqnOptions, EpisodeReport, EpsilonSchedule };
