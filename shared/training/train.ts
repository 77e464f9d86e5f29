/**
 * Mini-batch training with a fixed seed: the same data, seed and settings give the same weights
 * on any machine (plain double arithmetic, one thread). The weights of the epoch with the best
 * validation accuracy are kept.
 */
import type { Split } from './data.js';
import { pixels } from './data.js';
import { Adam, Network } from './network.js';
import type { LayerSpec } from './network.js';
import { seededRandom, shuffle } from '../random/index.js';

interface TrainOptions {
  layers: readonly LayerSpec[];
  epochs: number;
  batch: number;
  rate: number;
  seed: number;
  onEpoch?: (report: EpochReport) => void;
}

interface EpochReport {
  epoch: number;
  loss: number;
  validationAccuracy: number;
  seconds: number;
}

/** Share of `split` the network classifies correctly. */
function accuracy(network: Network, split: Split): number {
  let correct = 0;
  for (let i = 0; i < split.n; i += 1) {
    const p = network.forward(split.x.subarray(i * pixels, (i + 1) * pixels));
    let best = 0;
    for (let k = 1; k < p.length; k += 1) if (p[k]! > p[best]!) best = k;
    if (best === split.y[i]) correct += 1;
  }
  return correct / split.n;
}

function train(
  data: { train: Split; validation: Split },
  options: TrainOptions,
): { network: Network; history: EpochReport[]; bestEpoch: number } {
  const uniform = seededRandom(options.seed);
  const network = new Network([1, 28, 28], options.layers);
  network.initialize(uniform);
  const optimizer = new Adam(network.params, options.rate);
  const order = Array.from({ length: data.train.n }, (_, i) => i);
  const history: EpochReport[] = [];
  let best = {
    accuracy: -1,
    epoch: 0,
    weights: network.params.map((p) => Float64Array.from(p.value)),
  };
  for (let epoch = 1; epoch <= options.epochs; epoch += 1) {
    const started = performance.now();
    shuffle(order, uniform);
    let loss = 0;
    for (let start = 0; start < order.length; start += options.batch) {
      const end = Math.min(order.length, start + options.batch);
      network.zeroGrad();
      for (let k = start; k < end; k += 1) {
        const i = order[k]!;
        loss += network.learn(
          data.train.x.subarray(i * pixels, (i + 1) * pixels),
          data.train.y[i]!,
        );
      }
      optimizer.step(end - start);
    }
    const validationAccuracy = accuracy(network, data.validation);
    const report = {
      epoch,
      loss: loss / order.length,
      validationAccuracy,
      seconds: (performance.now() - started) / 1000,
    };
    history.push(report);
    options.onEpoch?.(report);
    if (validationAccuracy > best.accuracy) {
      best = {
        accuracy: validationAccuracy,
        epoch,
        weights: network.params.map((p) => Float64Array.from(p.value)),
      };
    }
  }
  network.params.forEach((p, k) => p.value.set(best.weights[k]!));
  return { network, history, bestEpoch: best.epoch };
}

export { train, accuracy };
export type { TrainOptions, EpochReport };
