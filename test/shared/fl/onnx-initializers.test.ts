/**
 * ONNX initializers by name (shared/training/onnx-export.ts): read the edge model's float32
 * weights, change them, write them back, and onnxruntime runs the result with the new weights.
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { loadOnnxModel } from '../../../shared/inference/onnx-runtime.js';
import { seededRandom } from '../../../shared/random/index.js';
import { edgeModel } from '../../../shared/training/models.js';
import { Network } from '../../../shared/training/network.js';
import {
  exportOnnx,
  importOnnx,
  readInitializers,
  replaceInitializers,
} from '../../../shared/training/onnx-export.js';

function edgeOnnx(): Uint8Array {
  const network = new Network([1, 28, 28], edgeModel.layers);
  network.initialize(seededRandom(3));
  return exportOnnx(network, 'edge-fl', 'test');
}

/** Four random 784-pixel inputs. */
const inputs = (() => {
  const uniform = seededRandom(5);
  return Float32Array.from({ length: 4 * 784 }, () => uniform());
})();

async function run(bytes: Uint8Array): Promise<Float32Array> {
  const model = await loadOnnxModel(bytes);
  try {
    expect([model.inputWidth, model.outputWidth]).toEqual([784, 10]);
    const out = await model.run(inputs, 4);
    expect(out.length).toBe(40);
    return out;
  } finally {
    await model.close();
  }
}

describe('ONNX initializers by name', () => {
  it('reads the float32 initializers with their names and dims (not the int64 shape)', () => {
    const weights = readInitializers(edgeOnnx());
    expect([...weights].map(([name, t]) => [name, t.dims])).toEqual([
      ['dense1.weight', [196, 32]],
      ['dense1.bias', [32]],
      ['dense2.weight', [32, 10]],
      ['dense2.bias', [10]],
    ]);
    const network = importOnnx(edgeOnnx());
    expect([...weights.get('dense1.weight')!.values]).toEqual(
      [...network.params[0]!.value].map(Math.fround),
    );
  });

  it('replaces weights so onnxruntime computes with the new ones', async () => {
    const original = edgeOnnx();
    const before = await run(original);
    const weights = readInitializers(original);
    // The last layer zeroed and its bias set: every input gets softmax(bias).
    const bias = Float32Array.from({ length: 10 }, (_, k) => k / 4);
    const changed = new Map(weights)
      .set('dense2.weight', { dims: [32, 10], values: new Float32Array(320) })
      .set('dense2.bias', { dims: [10], values: bias });
    const replaced = replaceInitializers(original, changed);
    const after = await run(replaced);
    const exp = [...bias].map(Math.exp);
    const total = exp.reduce((a, b) => a + b, 0);
    for (let i = 0; i < 4; i += 1) {
      for (let k = 0; k < 10; k += 1) {
        expect(Math.abs(after[i * 10 + k]! - exp[k]! / total)).toBeLessThanOrEqual(1e-6);
      }
    }
    expect(Math.abs(before[0]! - after[0]!)).toBeGreaterThan(1e-4);
    // Untouched initializers and the graph are as they were; reading back gives what was written.
    const reread = readInitializers(replaced);
    expect([...reread.get('dense1.weight')!.values]).toEqual([
      ...weights.get('dense1.weight')!.values,
    ]);
    expect([...reread.get('dense2.bias')!.values]).toEqual([...bias]);
    expect(importOnnx(replaced).specs).toEqual(importOnnx(original).specs);
  });

  it('agrees with the trainer after a small perturbation (max abs diff <= 1e-5)', async () => {
    const original = edgeOnnx();
    const weights = readInitializers(original);
    const w = weights.get('dense1.weight')!;
    const perturbed = Float32Array.from(w.values, (v, i) => v + (i % 7 === 0 ? 0.05 : -0.01));
    const replaced = replaceInitializers(
      original,
      new Map([['dense1.weight', { dims: w.dims, values: perturbed }]]),
    );
    const out = await run(replaced);
    const trainer = importOnnx(replaced);
    let worst = 0;
    for (let i = 0; i < 4; i += 1) {
      const p = trainer.forward(inputs.subarray(i * 784, (i + 1) * 784));
      for (let k = 0; k < 10; k += 1) worst = Math.max(worst, Math.abs(out[i * 10 + k]! - p[k]!));
    }
    expect(worst).toBeLessThanOrEqual(1e-5);
  });

  it('refuses unknown names, other dims and non-float initializers', () => {
    const original = edgeOnnx();
    const refuse = (name: string, dims: number[], message: RegExp) => {
      const weights = new Map([
        [name, { dims, values: new Float32Array(dims.reduce((a, b) => a * b, 1)) }],
      ]);
      expect(() => replaceInitializers(original, weights)).toThrow(ValidationError);
      expect(() => replaceInitializers(original, weights)).toThrow(message);
    };
    refuse('dense3.weight', [1], /the model has no initializer dense3.weight/);
    refuse(
      'dense2.bias',
      [5, 2],
      /initializer dense2.bias: dims \[5,2\] \(10 values\), the model has \[10\]/,
    );
    refuse('image_shape', [4], /initializer image_shape is not float32/);
  });
});
