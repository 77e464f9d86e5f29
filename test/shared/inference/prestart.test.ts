/**
 * A thread started ahead of time (prestartOnnxThread, as bin/serve.ts does for the inference
 * workers while their modules load) is the one the next start takes: it gets the model then,
 * serves like any other, and fails like any other when the model does not load.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { prestartOnnxThread, startOnnxWorker } from '../../../shared/inference/onnx-runtime.js';
import { createInferencePool } from '../../../shared/inference/pool.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';

const model = new Uint8Array(readFileSync(new URL('../../../models/edge.onnx', import.meta.url)));

describe('a thread started ahead of time', () => {
  it('is taken by the next start, with the model it is given then', async () => {
    const id = prestartOnnxThread();
    const thread = await startOnnxWorker(model);
    try {
      expect(thread.worker.threadId).toBe(id);
      expect(thread.signature.inputs.map((spec) => spec.name)).toEqual(['input']);
    } finally {
      await thread.stop();
    }
    // Taken once: the next start makes a thread of its own.
    const other = await startOnnxWorker(model);
    expect(other.worker.threadId).not.toBe(id);
    await other.stop();
  });

  it('serves a pool made after it', async () => {
    prestartOnnxThread();
    const pool = await createInferencePool({
      model,
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 256,
      maxWaitMs: 0,
    });
    try {
      const { test } = loadMnist();
      const out = await pool.infer(
        { input: { datatype: 'FP32', shape: [2, pixels], data: test.x.slice(0, 2 * pixels) } },
        2,
      );
      expect(out['probabilities']!.shape).toEqual([2, 10]);
    } finally {
      await pool.close();
    }
  });

  it('fails the start, and exits, when the model it is given does not load', async () => {
    prestartOnnxThread();
    await expect(startOnnxWorker(new Uint8Array([1, 2, 3]))).rejects.toThrow(/model does not load/);
  });
});
