/**
 * The served models (what they are and how `npm run models` trains them), and the further digit
 * architectures federated learning trains: McMahan et al.'s 2NN and a 203k-parameter MLP.
 */
import type { LayerSpec } from './network.js';
import type { TrainOptions } from './train.js';

/** Small and fast: the 28x28 input averaged down to 14x14, then a 196-32-10 MLP. */
const edgeModel = {
  name: 'edge',
  layers: [
    { type: 'avgpool2' },
    { type: 'flatten' },
    { type: 'dense', units: 32 },
    { type: 'relu' },
    { type: 'dense', units: 10 },
  ],
  epochs: 30,
  batch: 32,
  rate: 0.003,
  seed: 20261122,
} as const satisfies Omit<TrainOptions, 'onEpoch'> & { name: string };

/** Clearly more accurate: two 3x3 conv + max-pool stages (8 and 16 channels), then 784-64-10. */
const cloudModel = {
  name: 'cloud',
  layers: [
    { type: 'conv3x3', outChannels: 8 },
    { type: 'relu' },
    { type: 'maxpool2' },
    { type: 'conv3x3', outChannels: 16 },
    { type: 'relu' },
    { type: 'maxpool2' },
    { type: 'flatten' },
    { type: 'dense', units: 64 },
    { type: 'relu' },
    { type: 'dense', units: 10 },
  ],
  epochs: 12,
  batch: 32,
  rate: 0.002,
  seed: 20261123,
} as const satisfies Omit<TrainOptions, 'onEpoch'> & { name: string };

/**
 * McMahan et al. (2017)'s "2NN": 784-200-200-10 with ReLU, 199,210 parameters. Their MNIST
 * federated-averaging baseline, so our FL results compare with the paper's.
 */
const twoNN = {
  name: '2nn',
  layers: [
    { type: 'flatten' },
    { type: 'dense', units: 200 },
    { type: 'relu' },
    { type: 'dense', units: 200 },
    { type: 'relu' },
    { type: 'dense', units: 10 },
  ],
} as const satisfies { name: string; layers: readonly LayerSpec[] };

/**
 * 784-256-10 with ReLU, 203,530 parameters (~800 KB of float32): the size a weights transfer and
 * an aggregation are benchmarked at, one wide layer so training it stays cheap.
 */
const mlp256 = {
  name: 'mlp256',
  layers: [
    { type: 'flatten' },
    { type: 'dense', units: 256 },
    { type: 'relu' },
    { type: 'dense', units: 10 },
  ],
} as const satisfies { name: string; layers: readonly LayerSpec[] };

/** Every digit architecture by name (input [1, 28, 28], 10 classes): what an FL job names. */
const digitArchitectures = {
  edge: edgeModel.layers,
  cloud: cloudModel.layers,
  '2nn': twoNN.layers,
  mlp256: mlp256.layers,
} as const satisfies Record<string, readonly LayerSpec[]>;

/** The names of `digitArchitectures`. */
type DigitArchitecture = keyof typeof digitArchitectures;

export { edgeModel, cloudModel, twoNN, mlp256, digitArchitectures };
export type { DigitArchitecture };
