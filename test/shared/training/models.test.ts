/**
 * The committed models: onnxruntime gives the trainer's outputs on the whole test split, and the
 * training script reproduces the committed edge model byte for byte.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadOnnxModel } from '../../../shared/inference/onnx-runtime.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';
import { edgeModel } from '../../../shared/training/models.js';
import { exportOnnx, importOnnx } from '../../../shared/training/onnx-export.js';
import { accuracy, train } from '../../../shared/training/train.js';

const models = new URL('../../../models/', import.meta.url);
const read = (file: string) => new Uint8Array(readFileSync(new URL(file, models)));

describe('models', () => {
  const data = loadMnist();

  it('uses the documented split of the 10,000 digits', () => {
    expect(data.train.n + data.validation.n + data.test.n).toBe(10_000);
    expect([data.train.n, data.validation.n, data.test.n]).toEqual([7_020, 1_491, 1_489]);
  });

  it.each(['edge.onnx', 'cloud.onnx'])(
    '%s: onnxruntime equals the trainer on the test split (max abs diff <= 1e-4)',
    async (file) => {
      const bytes = read(file);
      const trainer = importOnnx(bytes);
      const model = await loadOnnxModel(bytes);
      const output = await model.run(data.test.x, data.test.n);
      let worst = 0;
      for (let i = 0; i < data.test.n; i += 1) {
        const expected = trainer.forward(data.test.x.subarray(i * pixels, (i + 1) * pixels));
        for (let k = 0; k < 10; k += 1) {
          worst = Math.max(worst, Math.abs(output[i * 10 + k]! - expected[k]!));
        }
      }
      await model.close();
      expect(worst).toBeLessThanOrEqual(1e-4);
      const card = JSON.parse(
        readFileSync(new URL(file.replace('.onnx', '.json'), models), 'utf8'),
      ) as {
        accuracy: { test: number };
      };
      expect(accuracy(trainer, data.test)).toBe(card.accuracy.test);
    },
  );

  // A full training run: ~11 s on an idle 2-core machine, well past the default 20 s when a
  // bench shares the cores, so it gets its own limit (it asserts bytes, not time).
  it('retraining the edge model reproduces the committed file byte for byte', () => {
    const { network } = train(data, edgeModel);
    const bytes = exportOnnx(
      network,
      'edgeai-edge',
      'edgeai edge model, trained by npm run models',
    );
    expect(Buffer.from(bytes).equals(Buffer.from(read('edge.onnx')))).toBe(true);
  }, 90_000);
});
