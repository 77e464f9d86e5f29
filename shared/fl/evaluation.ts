/**
 * How the aggregator measures each round's global model: the evaluation Dataset run through
 * onnxruntime (the runtime the inference workers serve the model with, so a model that evaluates
 * here is one they can serve), in one batch, on the aggregator's thread: about as long as one
 * update takes to arrive, where the trainer's own JavaScript network would take a second.
 */
import { loadOnnxModel } from '../inference/onnx-runtime.js';
import type { Split } from '../training/data.js';
import { onnxSignature } from '../training/onnx-export.js';
import type { Evaluation } from './local-train.js';

/** Softmax of `row` in place (a model whose head gives raw scores). */
function softmax(row: Float32Array): void {
  let max = -Infinity;
  for (const v of row) max = Math.max(max, v);
  let sum = 0;
  for (let k = 0; k < row.length; k += 1) sum += row[k] = Math.exp(row[k]! - max);
  for (let k = 0; k < row.length; k += 1) row[k]! /= sum;
}

/** Accuracy and mean cross-entropy of `model` on `split`. */
async function evaluateOnnx(model: Uint8Array, split: Split): Promise<Evaluation> {
  const { head, outputWidth } = onnxSignature(model);
  const session = await loadOnnxModel(model);
  try {
    const out = await session.run(split.x, split.n);
    let correct = 0;
    let loss = 0;
    for (let i = 0; i < split.n; i += 1) {
      const row = out.subarray(i * outputWidth, (i + 1) * outputWidth);
      if (head === 'identity') softmax(row);
      let best = 0;
      for (let k = 1; k < row.length; k += 1) if (row[k]! > row[best]!) best = k;
      const label = split.y[i]!;
      if (best === label) correct += 1;
      loss -= Math.log(Math.max(row[label] ?? 0, 1e-30));
    }
    return { accuracy: correct / split.n, loss: loss / split.n };
  } finally {
    await session.close();
  }
}

/** The evaluator of one evaluation Dataset. */
function onnxEvaluator(split: Split): (model: Uint8Array) => Promise<Evaluation> {
  return (model) => evaluateOnnx(model, split);
}

export { onnxEvaluator, evaluateOnnx };
