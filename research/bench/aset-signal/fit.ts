/**
 * Could a controller that sees ASET's state have told, decision by decision, which policy to
 * deviate to? Leave-one-seed-out: a learner fits on the other seeds' decisions and chooses on
 * the held-out seed's; its score is the gain its choices actually had there.
 */
import { qNetworkLayers } from '../../aset/learn/dqn.js';
import { greedyAction as argmax } from '../../../shared/aset/greedy.js';
import { Adam, Network } from '../../../shared/training/network.js';
import { seededRandom, shuffle } from '../../../shared/random/index.js';

/** One decision: the state, and each candidate's gain over the base policy, in points. */
interface Sample {
  /** Held out together (a seed's decisions share a workload). */
  readonly group: number;
  /** The decision's window index: what a clock, rather than the state, tells a controller. */
  readonly window: number;
  readonly state: Float32Array;
  readonly gains: readonly number[];
}

/** Mean realized gain (points) of each way of choosing, over every held-out decision. */
interface Scores {
  /** The best candidate of each decision, known after the fact: no controller can do it. */
  readonly hindsight: number;
  /** One candidate for every state: the best on average over the training seeds. */
  readonly stateFree: number;
  /**
   * One candidate per decision window (state-blind, but it knows the time since the empty
   * start): in a filling or patterned system the clock alone may say which policy pays.
   */
  readonly perWindow: number;
  /** The Q-network's architecture, trained to regress the gains from the state. */
  readonly network: number;
}

/**
 * The regression's settings: ASET's hidden layers; at least `epochs` passes and at least
 * `minSteps` gradient steps, so a small sample (80 decisions) is fitted as far as a large one.
 */
interface FitOptions {
  readonly hidden: readonly number[];
  readonly epochs: number;
  readonly minSteps: number;
  readonly batchSize: number;
  readonly learningRate: number;
  readonly seed: number;
}

const defaults: FitOptions = {
  hidden: [64, 32],
  epochs: 20,
  minSteps: 0,
  batchSize: 16,
  learningRate: 1e-3,
  seed: 1,
};

function trainNetwork(train: readonly Sample[], options: FitOptions): Network {
  const actions = train[0]!.gains.length;
  const network = new Network([train[0]!.state.length], qNetworkLayers(actions, options.hidden));
  const uniform = seededRandom(options.seed);
  network.initialize(uniform);
  const adam = new Adam(network.params, options.learningRate);
  const order = train.map((_, i) => i);
  const gradient = new Float64Array(actions);
  const batches = Math.ceil(train.length / options.batchSize);
  const epochs = Math.max(options.epochs, Math.ceil(options.minSteps / batches));
  for (let epoch = 0; epoch < epochs; epoch += 1) {
    shuffle(order, uniform);
    for (let from = 0; from < order.length; from += options.batchSize) {
      const batch = order.slice(from, from + options.batchSize);
      network.zeroGrad();
      for (const i of batch) {
        const sample = train[i]!;
        const q = network.logits(sample.state);
        // Squared error on every output: each candidate's gain is a known label.
        for (let a = 0; a < actions; a += 1) gradient[a] = q[a]! - sample.gains[a]!;
        network.backpropagate(gradient);
      }
      adam.step(batch.length);
    }
  }
  return network;
}

/** The candidate with the highest mean gain over `samples` (non-empty). */
function bestOnAverage(samples: readonly Sample[]): number {
  const actions = samples[0]!.gains.length;
  const means = Array.from(
    { length: actions },
    (_, a) => samples.reduce((sum, s) => sum + s.gains[a]!, 0) / samples.length,
  );
  return argmax(means);
}

/** Leave-one-group-out scores of the three ways of choosing (needs at least two groups). */
function crossValidate(samples: readonly Sample[], options: Partial<FitOptions> = {}): Scores {
  const settings = { ...defaults, ...options };
  const groups = [...new Set(samples.map((s) => s.group))];
  if (groups.length < 2) throw new RangeError('crossValidate needs samples from two groups');
  let hindsight = 0;
  let stateFree = 0;
  let perWindow = 0;
  let network = 0;
  for (const group of groups) {
    const train = samples.filter((s) => s.group !== group);
    const test = samples.filter((s) => s.group === group);
    const fixed = bestOnAverage(train);
    const fitted = trainNetwork(train, settings);
    for (const sample of test) {
      const sameWindow = train.filter((s) => s.window === sample.window);
      hindsight += Math.max(...sample.gains);
      stateFree += sample.gains[fixed]!;
      perWindow += sample.gains[sameWindow.length > 0 ? bestOnAverage(sameWindow) : fixed]!;
      network += sample.gains[argmax(fitted.logits(sample.state))]!;
    }
  }
  const n = samples.length;
  return {
    hindsight: hindsight / n,
    stateFree: stateFree / n,
    perWindow: perWindow / n,
    network: network / n,
  };
}

function medianOf(samples: readonly Sample[], feature: number): number {
  const values = samples.map((s) => s.state[feature]!).sort((a, b) => a - b);
  return values[Math.floor(values.length / 2)]!;
}

/**
 * The chooser that knows where to look: split the decisions at the median of `feature`, give
 * each half the candidate best on average in it. In-sample, so optimistic: the reference the
 * planted control's network is measured against.
 */
function medianSplitGain(samples: readonly Sample[], feature: number): number {
  const median = medianOf(samples, feature);
  let total = 0;
  for (const above of [false, true]) {
    const half = samples.filter((s) => s.state[feature]! > median === above);
    if (half.length === 0) continue;
    const means = half[0]!.gains.map((_, a) => half.reduce((sum, s) => sum + s.gains[a]!, 0));
    const choice = argmax(means);
    total += half.reduce((sum, s) => sum + s.gains[choice]!, 0);
  }
  return total / samples.length;
}

/**
 * The positive control: the same samples with an effect planted that only the state reveals:
 * `effect` points added to candidate `target` where state feature `feature` is above its median,
 * taken away where it is not. A learner that cannot find this cannot be trusted to report that
 * the real labels hold nothing.
 */
function plantEffect(
  samples: readonly Sample[],
  target: number,
  feature: number,
  effect: number,
): Sample[] {
  const median = medianOf(samples, feature);
  return samples.map((s) => ({
    ...s,
    gains: s.gains.map((g, a) =>
      a === target ? g + (s.state[feature]! > median ? effect : -effect) : g,
    ),
  }));
}

/** The state feature that varies most across the samples (the one the control plants on). */
function mostVariedFeature(samples: readonly Sample[]): number {
  const size = samples[0]!.state.length;
  let best = 0;
  let bestVariance = -1;
  for (let f = 0; f < size; f += 1) {
    const mean = samples.reduce((sum, s) => sum + s.state[f]!, 0) / samples.length;
    const variance = samples.reduce((sum, s) => sum + (s.state[f]! - mean) ** 2, 0);
    if (variance > bestVariance) {
      best = f;
      bestVariance = variance;
    }
  }
  return best;
}

export { crossValidate, plantEffect, mostVariedFeature, medianSplitGain, argmax };
export type { Sample, Scores, FitOptions };
