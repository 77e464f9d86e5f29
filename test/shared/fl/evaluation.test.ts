/**
 * The aggregator's evaluation through onnxruntime against the trainer's own network: the same
 * model on the same samples gives the same accuracy and (to float32 rounding) the same loss.
 */
import { describe, expect, it } from 'vitest';
import { evaluateOnnx } from '../../../shared/fl/evaluation.js';
import { evaluate } from '../../../shared/fl/local-train.js';
import { seededRandom } from '../../../shared/random/index.js';
import { edgeModel } from '../../../shared/training/models.js';
import { Network } from '../../../shared/training/network.js';
import { exportOnnx } from '../../../shared/training/onnx-export.js';

describe('evaluating a global model with onnxruntime', () => {
  it('agrees with the trainer network on accuracy and loss', async () => {
    const network = new Network([1, 28, 28], edgeModel.layers);
    network.initialize(seededRandom(4));
    const model = exportOnnx(network, 'm', 'test');
    const uniform = seededRandom(5);
    const n = 200;
    const split = {
      x: Float32Array.from({ length: n * 784 }, () => uniform()),
      y: Uint8Array.from({ length: n }, (_, i) => (i * 7) % 10),
      n,
    };
    const ort = await evaluateOnnx(model, split);
    const js = evaluate(model, edgeModel.layers, split);
    expect(ort.accuracy).toBe(js.accuracy);
    expect(Math.abs(ort.loss - js.loss)).toBeLessThan(1e-4);
  });
});
