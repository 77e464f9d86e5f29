/** FedAvg: the sample-weighted mean, independent of arrival order, and its refusals. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { fedAvg } from '../../../shared/fl/fedavg.js';
import type { WeightUpdate } from '../../../shared/fl/fedavg.js';
import type { Tensor } from '../../../shared/fl/weights.js';
import { seededRandom, shuffle } from '../../../shared/random/index.js';

const tensors = (w: number[], b: number[]) =>
  new Map<string, Tensor>([
    ['w', { dims: [2, 2], values: Float32Array.from(w) }],
    ['b', { dims: [2], values: Float32Array.from(b) }],
  ]);

const base = tensors([0, 0, 0, 0], [0, 0]);

describe('fedAvg', () => {
  it('is the sample-weighted mean (hand-computed), in the base order and dims', () => {
    const updates: WeightUpdate[] = [
      { worker: 'a', samples: 100, weights: tensors([1, 2, 3, 4], [1, -1]) },
      { worker: 'b', samples: 300, weights: tensors([5, 6, 7, 8], [0.5, 0.25]) },
      { worker: 'c', samples: 0, weights: tensors([1e6, 1e6, 1e6, 1e6], [9, 9]) },
    ];
    const out = fedAvg(base, updates);
    expect([...out.keys()]).toEqual(['w', 'b']);
    expect(out.get('w')!.dims).toEqual([2, 2]);
    // (100 * [1 2 3 4] + 300 * [5 6 7 8]) / 400 = [4 5 6 7]; c has no samples, so no weight;
    // (100 * 1 + 300 * 0.5) / 400 = 0.625, (100 * -1 + 300 * 0.25) / 400 = -0.0625.
    const expected = { w: [4, 5, 6, 7], b: [0.625, -0.0625] };
    for (const [name, values] of Object.entries(expected)) {
      const got = out.get(name)!.values;
      values.forEach((v, i) => expect(Math.abs(got[i]! - v)).toBeLessThanOrEqual(1e-6));
    }
  });

  it('gives bit-identical output whatever order the updates arrive in', () => {
    const uniform = seededRandom(7);
    const big = (n: number) => Array.from({ length: n }, () => (uniform() - 0.5) * 10);
    const baseBig = new Map<string, Tensor>([
      ['x', { dims: [1000], values: new Float32Array(1000) }],
    ]);
    const updates: WeightUpdate[] = Array.from({ length: 9 }, (_, k) => ({
      worker: `node-${k}`,
      samples: 1 + Math.floor(uniform() * 700),
      weights: new Map([['x', { dims: [1000], values: Float32Array.from(big(1000)) }]]),
    }));
    const first = fedAvg(baseBig, updates).get('x')!.values;
    for (let trial = 0; trial < 5; trial += 1) {
      const again = fedAvg(baseBig, shuffle([...updates], uniform)).get('x')!.values;
      expect(Buffer.from(again.buffer).equals(Buffer.from(first.buffer))).toBe(true);
    }
  });

  it('refuses updates whose names or dims differ from the model, naming worker and tensor', () => {
    const ok = { worker: 'ok', samples: 1, weights: tensors([1, 1, 1, 1], [1, 1]) };
    const refuse = (update: WeightUpdate, message: RegExp) => {
      expect(() => fedAvg(base, [ok, update])).toThrow(ValidationError);
      expect(() => fedAvg(base, [ok, update])).toThrow(message);
    };
    const missing = new Map([...tensors([1, 1, 1, 1], [1, 1])].slice(0, 1));
    refuse({ worker: 'n1', samples: 1, weights: missing }, /worker n1: tensor b is missing/);
    const extra = tensors([1, 1, 1, 1], [1, 1]).set('c', {
      dims: [1],
      values: new Float32Array(1),
    });
    refuse({ worker: 'n2', samples: 1, weights: extra }, /worker n2: tensor c is not in the model/);
    const transposed = tensors([1, 1, 1, 1], [1, 1]).set('w', {
      dims: [4, 1],
      values: new Float32Array(4),
    });
    refuse(
      { worker: 'n3', samples: 1, weights: transposed },
      /worker n3: tensor w has dims \[4,1\] \(4 values\), the model has \[2,2\]/,
    );
    refuse(
      { worker: 'n4', samples: 1, weights: tensors([1, NaN, 1, 1], [1, 1]) },
      /w of worker n4: value 1 is NaN/,
    );
    refuse({ worker: 'n5', samples: -3, weights: ok.weights }, /worker n5: samples -3/);
    refuse({ ...ok }, /worker ok sent two updates/);
  });

  it('refuses no updates and a total of zero samples', () => {
    expect(() => fedAvg(base, [])).toThrow(/no updates/);
    const zero = { worker: 'a', samples: 0, weights: tensors([1, 1, 1, 1], [1, 1]) };
    expect(() => fedAvg(base, [zero, { ...zero, worker: 'b' }])).toThrow(/zero samples in total/);
  });
});
