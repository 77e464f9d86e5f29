/** The two models: what they are and how they are trained (npm run models). */
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

export { edgeModel, cloudModel };
