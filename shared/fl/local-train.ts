/**
 * What a trainer does in a round: start from the global model's weights, run a few epochs of
 * mini-batch training on its own samples, and hand back the last weights (no validation-best
 * epoch as shared/training/train.ts keeps: the server averages what each trainer ended with).
 * Plain SGD by default, as McMahan et al. (2017) train FedAvg; a batch size of 0 or Infinity is
 * the whole local set per step (FedSGD with one epoch). FedProx (Li et al. 2020) adds
 * mu/2 ||w - w_global||^2 to the loss, i.e. mu (w - w_global) to every step's gradient.
 * Deterministic: the same model, data and options give the same weights.
 */
import { ValidationError } from '../errors/index.js';
import { seededRandom, shuffle } from '../random/index.js';
import { Adam } from '../training/network.js';
import type { LayerSpec, Network, Parameter } from '../training/network.js';
import type { Split } from '../training/data.js';
import { readInitializers } from '../training/onnx-export.js';
import { networkFrom, weightsOf } from './network-weights.js';
import type { NamedTensors, Tensor } from './weights.js';

/** The optimizers a trainer may use. */
const optimizers = ['sgd', 'adam'] as const;
type OptimizerName = (typeof optimizers)[number];

interface LocalTrainOptions {
  /** Passes over the local samples (McMahan's E). */
  readonly epochs: number;
  /** Samples per step (McMahan's B); 0 or Infinity: all of them (FedSGD). */
  readonly batchSize: number;
  readonly learningRate: number;
  /** Seeds the order of the samples, so a rerun gives the same weights. */
  readonly seed: number;
  /** FedProx's mu (>= 0); absent or 0: plain FedAvg. */
  readonly proximalMu?: number;
  /** `sgd` (default) or the trainer's Adam (its moments start at zero every round). */
  readonly optimizer?: OptimizerName;
}

/** What a trainer sends back: the weights to average, their weight, and how training went. */
interface LocalUpdate {
  readonly weights: Map<string, Tensor>;
  readonly samples: number;
  /** Mean cross-entropy over the last epoch's steps (without the proximal term). */
  readonly loss: number;
  /** Milliseconds of training (after the model is loaded and the data checked). */
  readonly trainMs: number;
}

/** What a model scores on a split: share classified right and mean cross-entropy. */
interface Evaluation {
  readonly accuracy: number;
  readonly loss: number;
}

/** One update step over the summed gradients of `batch` samples. */
interface Optimizer {
  step(batch: number): void;
}

/** Plain stochastic gradient descent: w -= rate * (gradient sum / batch). */
class Sgd implements Optimizer {
  constructor(
    private readonly params: readonly Parameter[],
    private readonly rate: number,
  ) {}

  step(batch: number): void {
    const scale = this.rate / batch;
    for (const { value, grad } of this.params) {
      for (let i = 0; i < value.length; i += 1) value[i]! -= scale * grad[i]!;
    }
  }
}

/** Throws unless the options describe a training run (ValidationError naming the field). */
function checkOptions(options: LocalTrainOptions): void {
  const { epochs, batchSize, learningRate, proximalMu = 0, optimizer = 'sgd' } = options;
  if (!Number.isSafeInteger(epochs) || epochs < 1) {
    throw new ValidationError(`epochs ${epochs} is not an integer >= 1`);
  }
  if (batchSize !== Infinity && !(Number.isSafeInteger(batchSize) && batchSize >= 0)) {
    throw new ValidationError(`batchSize ${batchSize} is not an integer >= 0 or Infinity`);
  }
  if (!Number.isFinite(learningRate) || learningRate < 0) {
    throw new ValidationError(`learningRate ${learningRate} is not a finite number >= 0`);
  }
  if (!Number.isFinite(proximalMu) || proximalMu < 0) {
    throw new ValidationError(`proximalMu ${proximalMu} is not a finite number >= 0`);
  }
  if (!optimizers.includes(optimizer)) {
    throw new ValidationError(
      `optimizer ${String(optimizer)} is not one of ${optimizers.join(', ')}`,
    );
  }
}

/** Throws unless `data` has samples of the network's width and labels it can output. */
function checkData(network: Network, data: Split): void {
  if (data.n < 1) throw new ValidationError('the local dataset has no samples');
  if (data.x.length !== data.n * network.inputSize || data.y.length !== data.n) {
    throw new ValidationError(
      `the dataset holds ${data.x.length} pixels and ${data.y.length} labels, not ${data.n} samples of ${network.inputSize}`,
    );
  }
  const label = data.y.findIndex((y) => y >= network.outputSize);
  if (label >= 0) {
    throw new ValidationError(
      `sample ${label} has label ${data.y[label]}, the model has ${network.outputSize} classes`,
    );
  }
}

/**
 * Adds `network`'s cross-entropy gradient for sample `i` of `data` to its parameter gradients
 * and returns the sample's loss. `gradient` is scratch space of the output's width.
 */
function learnSample(network: Network, data: Split, i: number, gradient: Float64Array): number {
  const width = network.inputSize;
  const label = data.y[i]!;
  const p = network.forward(data.x.subarray(i * width, (i + 1) * width));
  const loss = -Math.log(Math.max(p[label]!, 1e-300));
  gradient.set(p);
  gradient[label]! -= 1;
  // Unlike Network.learn, skips the first layer's input gradient (and zero pixels' rows).
  network.backpropagate(gradient);
  return loss;
}

/** FedProx: adds batch * mu * (w - w_global) to the summed gradients (optimizers divide by batch). */
function addProximal(
  params: readonly Parameter[],
  anchor: readonly Float64Array[],
  mu: number,
  batch: number,
): void {
  params.forEach(({ value, grad }, k) => {
    const start = anchor[k]!;
    for (let i = 0; i < value.length; i += 1) grad[i]! += batch * mu * (value[i]! - start[i]!);
  });
}

/** One epoch over `order` in steps of `batch`; returns the mean sample loss. */
function epoch(
  network: Network,
  data: Split,
  order: readonly number[],
  step: { batch: number; optimizer: Optimizer; mu: number; anchor: readonly Float64Array[] },
): number {
  const gradient = new Float64Array(network.outputSize);
  const params = network.params;
  let loss = 0;
  for (let start = 0; start < order.length; start += step.batch) {
    const end = Math.min(order.length, start + step.batch);
    network.zeroGrad();
    for (let k = start; k < end; k += 1) loss += learnSample(network, data, order[k]!, gradient);
    if (step.mu > 0) addProximal(params, step.anchor, step.mu, end - start);
    step.optimizer.step(end - start);
  }
  return loss / order.length;
}

/**
 * Trains a copy of the global model (its ONNX bytes, of the architecture `layers`) on `data` and
 * returns the last weights, named and shaped as the model's initializers, so they go straight
 * into fedAvg and replaceInitializers. Refuses (ValidationError) a model of another architecture,
 * an empty or malformed dataset and options out of range.
 */
function localTrain(
  globalModel: Uint8Array,
  layers: readonly LayerSpec[],
  data: Split,
  options: LocalTrainOptions,
): LocalUpdate {
  checkOptions(options);
  const network = networkFrom(readInitializers(globalModel), layers);
  return { ...trainInPlace(network, data, options), weights: weightsOf(network) };
}

/**
 * localTrain on a Network already holding the global model's weights (networkFrom), which it
 * trains in place (its parameters are then the update's weights: parameterTensors): a trainer
 * that has rebuilt the model to check it does not build it twice.
 */
function trainInPlace(
  network: Network,
  data: Split,
  options: LocalTrainOptions,
): Omit<LocalUpdate, 'weights'> {
  checkOptions(options);
  checkData(network, data);
  const started = performance.now();
  const params = network.params;
  const optimizer =
    options.optimizer === 'adam'
      ? new Adam(params, options.learningRate)
      : new Sgd(params, options.learningRate);
  const mu = options.proximalMu ?? 0;
  const step = {
    batch: options.batchSize === 0 ? Infinity : options.batchSize,
    optimizer,
    mu,
    // FedProx's anchor, the global weights, copied only when it pulls towards them.
    anchor: mu > 0 ? params.map((p) => Float64Array.from(p.value)) : [],
  };
  const uniform = seededRandom(options.seed);
  const order = Array.from({ length: data.n }, (_, i) => i);
  let loss = NaN;
  for (let e = 0; e < options.epochs; e += 1) {
    shuffle(order, uniform);
    loss = epoch(network, data, order, step);
  }
  return { samples: data.n, loss, trainMs: performance.now() - started };
}

/**
 * Accuracy and mean cross-entropy of a model (ONNX bytes or named weights) of the architecture
 * `layers` on `split`, computed by the trainer's Network in float64.
 */
function evaluate(
  model: Uint8Array | NamedTensors,
  layers: readonly LayerSpec[],
  split: Split,
): Evaluation {
  const network = networkFrom(
    model instanceof Uint8Array ? readInitializers(model) : model,
    layers,
  );
  checkData(network, split);
  const width = network.inputSize;
  let correct = 0;
  let loss = 0;
  for (let i = 0; i < split.n; i += 1) {
    const p = network.forward(split.x.subarray(i * width, (i + 1) * width));
    const label = split.y[i]!;
    let best = 0;
    for (let k = 1; k < p.length; k += 1) if (p[k]! > p[best]!) best = k;
    if (best === label) correct += 1;
    loss -= Math.log(Math.max(p[label]!, 1e-300));
  }
  return { accuracy: correct / split.n, loss: loss / split.n };
}

export { localTrain, trainInPlace, evaluate };
export type { LocalTrainOptions, LocalUpdate, Evaluation };
