/**
 * The trainer's extensions for losses other than softmax cross-entropy (the ASET Q-network):
 * raw outputs, backpropagation of an arbitrary output gradient, parameter copies, and the ONNX
 * export's options. The MNIST models' own behaviour is pinned by models.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Network } from '../../../shared/training/network.js';
import type { LayerSpec } from '../../../shared/training/network.js';
import { exportOnnx, importOnnx, onnxSignature } from '../../../shared/training/onnx-export.js';
import { seededRandom } from '../../../shared/random/index.js';

const models = new URL('../../../models/', import.meta.url);

function randomNetwork(inShape: number[], specs: LayerSpec[], seed: number): Network {
  const net = new Network(inShape, specs);
  const uniform = seededRandom(seed);
  net.initialize(uniform);
  // Non-zero biases, so ReLU and pooling boundaries are exercised away from ties.
  for (const p of net.params)
    if (p.name.endsWith('bias')) p.value.forEach((_, i) => (p.value[i] = uniform() - 0.5));
  return net;
}

/**
 * A loss on the raw outputs z that is not cross-entropy: a TD-like squared error on one output
 * plus a linear term on all of them, L = (z_a - c)^2 + sum_k u_k z_k; dL/dz is known exactly.
 */
function tdLikeLoss(z: Float64Array, action: number, c: number, u: readonly number[]): number {
  let loss = (z[action]! - c) ** 2;
  z.forEach((v, k) => (loss += u[k]! * v));
  return loss;
}

function tdLikeGradient(z: Float64Array, action: number, c: number, u: readonly number[]) {
  const g = Float64Array.from(u);
  g[action]! += 2 * (z[action]! - c);
  return g;
}

describe('Network.logits and Network.backpropagate', () => {
  it.each<[string, number[], LayerSpec[]]>([
    [
      'MLP (the Q-network shape)',
      [9],
      [
        { type: 'dense', units: 7 },
        { type: 'relu' },
        { type: 'dense', units: 5 },
        { type: 'relu' },
        { type: 'dense', units: 4 },
      ],
    ],
    [
      'conv + pooling + dense',
      [2, 6, 6],
      [
        { type: 'conv3x3', outChannels: 3 },
        { type: 'relu' },
        { type: 'maxpool2' },
        { type: 'avgpool2' },
        { type: 'flatten' },
        { type: 'dense', units: 4 },
      ],
    ],
  ])('%s: analytic = numeric gradient of an arbitrary output loss', (_name, inShape, specs) => {
    for (const seed of [1, 2, 3]) {
      const net = randomNetwork(inShape, specs, seed);
      const uniform = seededRandom(seed + 100);
      const size = inShape.reduce((a, b) => a * b, 1);
      // Two samples, so accumulation across calls is checked too.
      const samples = [0, 1].map(() =>
        Array.from({ length: size }, () => (uniform() < 0.2 ? 0 : uniform() - 0.3)),
      );
      const u = [0.3, -0.2, 0.1, 0.05];
      const targets = [0.7, -0.4];
      const actions = [2, 0];
      const loss = () =>
        samples.reduce(
          (sum, x, n) => sum + tdLikeLoss(net.logits(x), actions[n]!, targets[n]!, u),
          0,
        );
      net.zeroGrad();
      samples.forEach((x, n) => {
        const z = net.logits(x);
        net.backpropagate(tdLikeGradient(z, actions[n]!, targets[n]!, u));
      });
      const h = 1e-6;
      let worst = 0;
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
          const diff = Math.abs(numeric - analytic);
          if (diff > 1e-7) {
            worst = Math.max(worst, diff / Math.max(1e-8, Math.abs(numeric) + Math.abs(analytic)));
          }
        }
      }
      expect(worst).toBeLessThan(1e-5);
    }
  });

  it('forward is the softmax of logits, and learn = backpropagate of (p - onehot)', () => {
    const specs: LayerSpec[] = [
      { type: 'dense', units: 6 },
      { type: 'relu' },
      { type: 'dense', units: 3 },
    ];
    const a = randomNetwork([5], specs, 4);
    const b = a.clone();
    const x = [0.1, 0, 0.7, -0.3, 0.2];
    const z = Float64Array.from(a.logits(x));
    const p = a.forward(x);
    const max = Math.max(...z);
    const sum = z.reduce((s, v) => s + Math.exp(v - max), 0);
    z.forEach((v, k) => expect(p[k]).toBeCloseTo(Math.exp(v - max) / sum, 14));
    a.zeroGrad();
    a.learn(x, 1);
    b.zeroGrad();
    const grad = Float64Array.from(b.forward(x));
    grad[1]! -= 1;
    b.backpropagate(grad);
    a.params.forEach((param, k) => expect(b.params[k]!.grad).toEqual(param.grad));
  });

  it('rejects inputs and gradients of the wrong size', () => {
    const net = new Network([4], [{ type: 'dense', units: 2 }]);
    expect(() => net.logits([1, 2, 3])).toThrow(/3 features/);
    expect(() => net.forward([1, 2, 3, 4, 5])).toThrow(/5 features/);
    net.logits([1, 2, 3, 4]);
    expect(() => net.backpropagate([1])).toThrow(/1 outputs/);
  });
});

describe('parameter copies', () => {
  const specs: LayerSpec[] = [
    { type: 'dense', units: 4 },
    { type: 'relu' },
    { type: 'dense', units: 2 },
  ];

  it('copyFrom, clone and get/setParameters move every value and nothing else', () => {
    const a = randomNetwork([3], specs, 1);
    const b = randomNetwork([3], specs, 2);
    expect(b.getParameters()).not.toEqual(a.getParameters());
    b.copyFrom(a);
    expect(b.getParameters()).toEqual(a.getParameters());
    const c = a.clone();
    expect(c.getParameters()).toEqual(a.getParameters());
    // Independent storage: changing the copy leaves the source alone.
    c.params[0]!.value[0]! += 1;
    expect(c.getParameters()).not.toEqual(a.getParameters());
    const saved = a.getParameters();
    expect(saved.length).toBe(3 * 4 + 4 + 4 * 2 + 2);
    const d = randomNetwork([3], specs, 3);
    d.setParameters(saved);
    expect(Array.from(d.logits([0.5, -1, 2]))).toEqual(Array.from(a.logits([0.5, -1, 2])));
  });

  it('refuses a different architecture', () => {
    const a = new Network([3], specs);
    expect(() => a.copyFrom(new Network([4], specs))).toThrow(/differ/);
    expect(() => a.copyFrom(new Network([3], [{ type: 'dense', units: 2 }]))).toThrow(/differ/);
    expect(() => a.setParameters(new Float64Array(5))).toThrow(/5 parameter values/);
  });
});

describe('ONNX export options', () => {
  it('the default export of the committed models is unchanged, byte for byte', () => {
    // Their float32 weights survive the round trip exactly, so re-exporting with today's code
    // and the committed names must give the committed bytes.
    for (const [file, name] of [
      ['edge.onnx', 'edge'],
      ['cloud.onnx', 'cloud'],
    ] as const) {
      const bytes = new Uint8Array(readFileSync(new URL(file, models)));
      const again = exportOnnx(
        importOnnx(bytes),
        `edgeai-${name}`,
        `edgeai ${name} model, trained by npm run models`,
      );
      expect(Buffer.from(again).equals(Buffer.from(bytes))).toBe(true);
      expect(onnxSignature(bytes)).toEqual({
        inputName: 'input',
        inputWidth: 784,
        outputName: 'probabilities',
        outputWidth: 10,
        head: 'softmax',
      });
    }
  });

  it('an identity head with a flat input round-trips with its names and shape', () => {
    const net = randomNetwork(
      [11],
      [{ type: 'dense', units: 8 }, { type: 'relu' }, { type: 'dense', units: 7 }],
      5,
    );
    const bytes = exportOnnx(net, 'q', 'test', {
      inputName: 'state',
      head: 'identity',
      outputName: 'q',
    });
    expect(onnxSignature(bytes)).toEqual({
      inputName: 'state',
      inputWidth: 11,
      outputName: 'q',
      outputWidth: 7,
      head: 'identity',
    });
    const back = importOnnx(bytes);
    expect(back.inShape).toEqual([11]);
    expect(back.specs).toEqual(net.specs);
    // The import holds the float32-rounded weights.
    back.params.forEach((p, k) =>
      expect(p.value).toEqual(Float64Array.from(Float32Array.from(net.params[k]!.value))),
    );
  });

  it('defaults the identity output name and keeps an image input reshaped', () => {
    const net = randomNetwork(
      [1, 4, 4],
      [{ type: 'avgpool2' }, { type: 'flatten' }, { type: 'dense', units: 3 }],
      6,
    );
    const bytes = exportOnnx(net, 'img', 'test', { head: 'identity' });
    expect(onnxSignature(bytes)).toMatchObject({
      inputName: 'input',
      inputWidth: 16,
      outputName: 'output',
    });
    expect(importOnnx(bytes).inShape).toEqual([1, 4, 4]);
  });
});
