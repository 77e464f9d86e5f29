/** The trainer's backward passes against central differences, layer type by layer type. */
import { describe, expect, it } from 'vitest';
import { Network } from '../../../shared/training/network.js';
import type { LayerSpec } from '../../../shared/training/network.js';
import { seededRandom } from '../../../shared/random/index.js';

function numericCheck(inShape: number[], specs: LayerSpec[], seed: number): number {
  const net = new Network(inShape, specs);
  const uniform = seededRandom(seed);
  net.initialize(uniform);
  // Non-zero biases, so ReLU and pooling boundaries are exercised away from ties.
  for (const p of net.params)
    if (p.name.endsWith('bias')) p.value.forEach((_, i) => (p.value[i] = uniform() - 0.5));
  const input = Array.from({ length: inShape.reduce((a, b) => a * b, 1) }, () => uniform());
  const label = 3;
  net.zeroGrad();
  net.learn(input, label);
  const loss = () => -Math.log(net.forward(input)[label]!);
  let worst = 0;
  const h = 1e-6;
  for (const param of net.params) {
    for (let i = 0; i < param.value.length; i += 1) {
      const saved = param.value[i]!;
      param.value[i] = saved + h;
      const up = loss();
      param.value[i] = saved - h;
      const down = loss();
      param.value[i] = saved;
      const numeric = (up - down) / (2 * h);
      const analytic = param.grad[i]!;
      const error =
        Math.abs(numeric - analytic) / Math.max(1e-8, Math.abs(numeric) + Math.abs(analytic));
      if (Math.abs(numeric - analytic) > 1e-7) worst = Math.max(worst, error);
    }
  }
  return worst;
}

describe('trainer gradients', () => {
  it.each<[string, number[], LayerSpec[]]>([
    [
      'dense + relu',
      [12],
      [{ type: 'dense', units: 7 }, { type: 'relu' }, { type: 'dense', units: 5 }],
    ],
    [
      'average pooling + dense (the edge model)',
      [1, 6, 6],
      [
        { type: 'avgpool2' },
        { type: 'flatten' },
        { type: 'dense', units: 6 },
        { type: 'relu' },
        { type: 'dense', units: 5 },
      ],
    ],
    [
      'conv + relu + max pooling + dense (the cloud model)',
      [2, 6, 6],
      [
        { type: 'conv3x3', outChannels: 3 },
        { type: 'relu' },
        { type: 'maxpool2' },
        { type: 'conv3x3', outChannels: 2 },
        { type: 'relu' },
        { type: 'flatten' },
        { type: 'dense', units: 5 },
      ],
    ],
    [
      'avg pooling + conv + max pooling + conv 1x1 (the detectors)',
      [1, 8, 8],
      [
        { type: 'avgpool2' },
        { type: 'conv3x3', outChannels: 3 },
        { type: 'relu' },
        { type: 'maxpool2' },
        { type: 'conv3x3', outChannels: 4 },
        { type: 'relu' },
        { type: 'conv1x1', outChannels: 5 },
      ],
    ],
  ])('%s: analytic = numeric gradient', (_name, inShape, specs) => {
    for (const seed of [1, 2, 3]) expect(numericCheck(inShape, specs, seed)).toBeLessThan(1e-5);
  });

  it('a wrong backward pass would be caught', () => {
    const net = new Network([4], [{ type: 'dense', units: 5 }]);
    net.initialize(seededRandom(9));
    net.zeroGrad();
    net.learn([0.1, 0.2, 0.3, 0.4], 1);
    const weight = net.params[0]!;
    weight.grad[0]! += 0.01;
    const saved = weight.value[0]!;
    const h = 1e-6;
    weight.value[0] = saved + h;
    const up = -Math.log(net.forward([0.1, 0.2, 0.3, 0.4])[1]!);
    weight.value[0] = saved - h;
    const down = -Math.log(net.forward([0.1, 0.2, 0.3, 0.4])[1]!);
    expect(Math.abs((up - down) / (2 * h) - weight.grad[0]!)).toBeGreaterThan(0.005);
  });
});
