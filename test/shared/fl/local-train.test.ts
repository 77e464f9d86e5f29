/**
 * A trainer's round: starts from the global model's weights, plain SGD by default (checked
 * against the gradient computed by hand), FedSGD for a full batch, FedProx's pull towards the
 * global weights, determinism, evaluation, and a few FedAvg rounds that learn.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { fedAvg } from '../../../shared/fl/fedavg.js';
import { evaluate, localTrain } from '../../../shared/fl/local-train.js';
import type { LocalTrainOptions } from '../../../shared/fl/local-train.js';
import { networkFrom } from '../../../shared/fl/network-weights.js';
import { partition } from '../../../shared/fl/partition.js';
import type { NamedTensors } from '../../../shared/fl/weights.js';
import { seededRandom } from '../../../shared/random/index.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';
import type { Split } from '../../../shared/training/data.js';
import { cloudModel, edgeModel, twoNN } from '../../../shared/training/models.js';
import { Network } from '../../../shared/training/network.js';
import {
  exportOnnx,
  readInitializers,
  replaceInitializers,
} from '../../../shared/training/onnx-export.js';
import { accuracy } from '../../../shared/training/train.js';

const data = loadMnist();
const layers = edgeModel.layers;

function globalModel(seed = 11): Uint8Array {
  const network = new Network([1, 28, 28], layers);
  network.initialize(seededRandom(seed));
  return exportOnnx(network, 'global', 'test');
}

/** The samples `indices` of `split` as a split of their own. */
function subset(split: Split, indices: readonly number[]): Split {
  const x = new Float32Array(indices.length * pixels);
  const y = new Uint8Array(indices.length);
  indices.forEach((i, k) => {
    x.set(split.x.subarray(i * pixels, (i + 1) * pixels), k * pixels);
    y[k] = split.y[i]!;
  });
  return { x, y, n: indices.length };
}

const local = subset(
  data.train,
  Array.from({ length: 200 }, (_, i) => i * 35),
);
const options: LocalTrainOptions = { epochs: 1, batchSize: 10, learningRate: 0.1, seed: 1 };

const flat = (weights: NamedTensors) => [...weights.values()].flatMap((t) => [...t.values]);
const distance = (a: NamedTensors, b: NamedTensors) => {
  const x = flat(a);
  const y = flat(b);
  return Math.sqrt(x.reduce((s, v, i) => s + (v - y[i]!) ** 2, 0));
};

/** Full-batch gradient descent by hand, with the trainer's own Network.learn. */
function byHand(model: Uint8Array, steps: number, rate: number, mu: number): number[] {
  const network = networkFrom(readInitializers(model), layers);
  const anchor = network.getParameters();
  for (let s = 0; s < steps; s += 1) {
    network.zeroGrad();
    for (let i = 0; i < local.n; i += 1) {
      network.learn(local.x.subarray(i * pixels, (i + 1) * pixels), local.y[i]!);
    }
    const grads = network.params.flatMap((p) => [...p.grad]);
    const values = network.getParameters();
    network.setParameters(
      values.map((w, i) => w - rate * (grads[i]! / local.n + mu * (w - anchor[i]!))),
    );
  }
  return [...network.getParameters()].map(Math.fround);
}

describe('localTrain', () => {
  it('starts from the global weights: a zero learning rate gives them back bit for bit', () => {
    const model = globalModel();
    const update = localTrain(model, layers, local, { ...options, learningRate: 0 });
    expect(update.samples).toBe(200);
    expect(update.loss).toBeGreaterThan(0);
    expect(flat(update.weights)).toEqual(flat(readInitializers(model)));
    expect([...update.weights].map(([n, t]) => [n, t.dims])).toEqual(
      [...readInitializers(model)].map(([n, t]) => [n, t.dims]),
    );
  });

  it('is plain SGD: a full batch (0 or Infinity) is one gradient step per epoch (FedSGD)', () => {
    const model = globalModel();
    const expected = byHand(model, 2, 0.5, 0);
    for (const batchSize of [0, Infinity]) {
      const got = flat(
        localTrain(model, layers, local, { ...options, epochs: 2, batchSize, learningRate: 0.5 })
          .weights,
      );
      const worst = got.reduce((m, v, i) => Math.max(m, Math.abs(v - expected[i]!)), 0);
      expect(worst).toBeLessThanOrEqual(1e-6);
    }
  });

  it('adds FedProx mu (w - w_global) to the gradient', () => {
    const model = globalModel();
    const expected = byHand(model, 3, 0.5, 2);
    const got = flat(
      localTrain(model, layers, local, {
        ...options,
        epochs: 3,
        batchSize: 0,
        learningRate: 0.5,
        proximalMu: 2,
      }).weights,
    );
    const worst = got.reduce((m, v, i) => Math.max(m, Math.abs(v - expected[i]!)), 0);
    expect(worst).toBeLessThanOrEqual(1e-6);
    const plain = localTrain(model, layers, local, { ...options, epochs: 3 });
    const prox = localTrain(model, layers, local, { ...options, epochs: 3, proximalMu: 1 });
    const global = readInitializers(model);
    expect(distance(prox.weights, global)).toBeLessThan(distance(plain.weights, global));
  });

  it('is deterministic for a seed, and the seed orders the samples', () => {
    const model = globalModel();
    const a = localTrain(model, layers, local, options);
    const b = localTrain(model, layers, local, options);
    const c = localTrain(model, layers, local, { ...options, seed: 2 });
    expect(flat(a.weights)).toEqual(flat(b.weights));
    expect(a.loss).toBe(b.loss);
    expect(flat(c.weights)).not.toEqual(flat(a.weights));
  });

  it('learns: loss and test accuracy improve over epochs, with SGD and with Adam', () => {
    const model = globalModel();
    const before = evaluate(model, layers, data.test);
    for (const optimizer of ['sgd', 'adam'] as const) {
      const rate = optimizer === 'sgd' ? 0.1 : 0.003;
      const update = localTrain(model, layers, local, {
        ...options,
        epochs: 5,
        learningRate: rate,
        optimizer,
      });
      const after = evaluate(update.weights, layers, data.test);
      expect(after.accuracy).toBeGreaterThan(before.accuracy + 0.3);
      expect(after.loss).toBeLessThan(before.loss);
      expect(update.trainMs).toBeGreaterThan(0);
    }
  });

  it('trains the 2NN from its ONNX model', () => {
    const network = new Network([1, 28, 28], twoNN.layers);
    network.initialize(seededRandom(4));
    const model = exportOnnx(network, '2nn', 'test');
    const update = localTrain(model, twoNN.layers, local, { ...options, epochs: 2 });
    expect(update.weights.get('dense2.weight')!.dims).toEqual([200, 200]);
    expect(evaluate(update.weights, twoNN.layers, data.test).accuracy).toBeGreaterThan(0.5);
  });

  it('refuses a model of another architecture, bad options and bad data', () => {
    const model = globalModel();
    const refuse = (run: () => unknown, message: RegExp) => {
      expect(run).toThrow(ValidationError);
      expect(run).toThrow(message);
    };
    refuse(() => localTrain(model, cloudModel.layers, local, options), /no tensor conv1.weight/);
    refuse(
      () =>
        localTrain(model, [...layers.slice(0, 4), { type: 'dense', units: 11 }], local, options),
      /tensor dense2.weight has dims \[32,10\], these layers need \[32,11\]/,
    );
    refuse(
      () => localTrain(model, layers.slice(0, 3), local, options),
      /tensor dense2.weight of the model is not a parameter of these layers/,
    );
    refuse(() => localTrain(model, layers, local, { ...options, epochs: 0 }), /epochs 0/);
    refuse(() => localTrain(model, layers, local, { ...options, batchSize: 2.5 }), /batchSize 2.5/);
    refuse(
      () => localTrain(model, layers, local, { ...options, learningRate: NaN }),
      /learningRate NaN/,
    );
    refuse(() => localTrain(model, layers, local, { ...options, proximalMu: -1 }), /proximalMu -1/);
    const empty = { x: new Float32Array(0), y: new Uint8Array(0), n: 0 };
    refuse(() => localTrain(model, layers, empty, options), /no samples/);
    const badLabel = { ...local, y: Uint8Array.from(local.y, (y, i) => (i === 3 ? 12 : y)) };
    refuse(() => localTrain(model, layers, badLabel, options), /sample 3 has label 12/);
  });
});

describe('evaluate', () => {
  it('gives the same accuracy from bytes and weights, and as train.ts counts it', () => {
    const model = globalModel();
    const fromBytes = evaluate(model, layers, data.validation);
    const fromWeights = evaluate(readInitializers(model), layers, data.validation);
    expect(fromBytes).toEqual(fromWeights);
    const network = networkFrom(readInitializers(model), layers);
    expect(fromBytes.accuracy).toBe(accuracy(network, data.validation));
    expect(fromBytes.loss).toBeGreaterThan(0);
  });
});

describe('FedAvg rounds', () => {
  it('three non-IID clients, three rounds: the served global model gets better', () => {
    const train = subset(
      data.train,
      Array.from({ length: 900 }, (_, i) => i * 7),
    );
    const clients = partition(train.y, { kind: 'shards', clients: 3, seed: 1 }).map((p, k) => ({
      worker: `node-${k}`,
      data: subset(train, p),
    }));
    let model = globalModel();
    const start = evaluate(model, layers, data.test).accuracy;
    for (let round = 0; round < 3; round += 1) {
      const updates = clients.map(({ worker, data: split }) => {
        const update = localTrain(model, layers, split, { ...options, epochs: 2, seed: round });
        return { worker, samples: update.samples, weights: update.weights };
      });
      model = replaceInitializers(model, fedAvg(readInitializers(model), updates));
    }
    expect(evaluate(model, layers, data.test).accuracy).toBeGreaterThan(start + 0.3);
  });
});
