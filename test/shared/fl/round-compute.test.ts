/**
 * A round's computation: the start-up warm-up reads the Dataset once and changes no round; the
 * Network kept between rounds and the memory the model is decoded into change none either.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeDatasetCsv } from '../../../shared/fl/dataset-file.js';
import { cachedDatasetReader, readDataset } from '../../../shared/fl/dataset-source.js';
import type { DatasetReader } from '../../../shared/fl/dataset-source.js';
import {
  computeRound,
  decodeModel,
  keptNetwork,
  reusedMemory,
  warmUp,
} from '../../../shared/fl/round-compute.js';
import { decodeWeights } from '../../../shared/fl/weights.js';
import { seededRandom } from '../../../shared/random/index.js';
import { loadMnist } from '../../../shared/training/data.js';
import { Network } from '../../../shared/training/network.js';
import { exportOnnx, replaceInitializers } from '../../../shared/training/onnx-export.js';

const training = { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 3, proximalMu: 0 };

function fixture() {
  const dir = mkdtempSync(join(tmpdir(), 'fl-round-'));
  const file = join(dir, 'client.csv');
  writeFileSync(file, writeDatasetCsv(loadMnist().train, [...Array(120).keys()]));
  const network = new Network(
    [1, 28, 28],
    [
      { type: 'dense', units: 32 },
      { type: 'dense', units: 10 },
    ],
  );
  network.initialize(seededRandom(2));
  const source = { url: `file://${file}`, format: 'csv', maxBytes: 1 << 24 };
  return { source, model: exportOnnx(network, 'small', 'test'), dir };
}

describe('the warm-up before the first round', () => {
  it('reads the Dataset for the first round, which then trains the same bytes as without it', async () => {
    const { source, model } = fixture();
    let reads = 0;
    const counting: DatasetReader = (s) => {
      reads += 1;
      return readDataset(s);
    };
    const warmed = { read: cachedDatasetReader(counting), source };
    await warmUp(warmed);
    expect(reads).toBe(1);
    const after = await computeRound(decodeModel(model), training, warmed);
    expect(reads).toBe(1);
    const cold = await computeRound(decodeModel(model), training, { read: readDataset, source });
    // The whole Dataset, not the warm-up's 50 samples.
    expect(after.samples).toBe(120);
    expect(Buffer.from(after.encoded).equals(Buffer.from(cold.encoded))).toBe(true);
    expect(after.loss).toBe(cold.loss);
  });

  it('never throws: a Dataset that cannot be read is the first round to report', async () => {
    const { dir } = fixture();
    const source = { url: `file://${join(dir, 'missing.csv')}`, format: 'csv', maxBytes: 1 << 24 };
    await expect(warmUp({ read: readDataset, source })).resolves.toBeUndefined();
  });
});

describe('the Network and the memory kept from one round to the next', () => {
  it('trains each round to the same bytes as a new Network and new memory, across models and architectures', async () => {
    const { source, model } = fixture();
    const data = { read: readDataset, source };
    const first = await computeRound(decodeModel(model), training, data);
    // The next round's model: the first round's weights (another global model, same layers).
    const trained = decodeWeights(first.encoded, { maxBytes: 1 << 24, maxTensors: 8 });
    const next = replaceInitializers(model, trained);
    const wider = new Network([1, 28, 28], [{ type: 'dense', units: 10 }]);
    wider.initialize(seededRandom(5));
    const other = exportOnnx(wider, 'other', 'test');
    // The kept Network, and one memory every round's update is written into.
    const memory = new SharedArrayBuffer(1 << 20);
    const kept = { network: keptNetwork(), memory: (n: number) => new Uint8Array(memory, 0, n) };
    for (const bytes of [model, next, other, model]) {
      const reused = await computeRound(decodeModel(bytes), training, data, kept);
      expect(reused.encoded.buffer).toBe(memory);
      const fresh = await computeRound(decodeModel(bytes), training, data);
      expect(Buffer.from(reused.encoded).equals(Buffer.from(fresh.encoded))).toBe(true);
      expect(reused.loss).toBe(fresh.loss);
    }
  });

  it('decodes each round into the same shared memory, and trains as from new memory', async () => {
    const { model, source } = fixture();
    const data = { read: readDataset, source };
    const moved = replaceInitializers(
      model,
      new Map(
        [...decodeModel(model).weights].map(([name, t]) => [
          name,
          { dims: t.dims, values: t.values.map((v) => v + 0.01) },
        ]),
      ),
    );
    const decoded = reusedMemory();
    const buffers = new Set<ArrayBufferLike>();
    for (const bytes of [model, moved, model, moved]) {
      decoded.reset();
      const reused = decodeModel(bytes, decoded.memory);
      for (const { values } of reused.weights.values()) {
        expect(values.buffer).toBeInstanceOf(SharedArrayBuffer);
        buffers.add(values.buffer);
      }
      const fromReused = await computeRound(reused, training, data);
      const fromNew = await computeRound(decodeModel(bytes), training, data);
      expect(Buffer.from(fromReused.encoded).equals(Buffer.from(fromNew.encoded))).toBe(true);
    }
    // Round 1 sized it (a buffer per tensor); from round 2 on every tensor shares one buffer.
    expect(buffers.size).toBe(decodeModel(model).weights.size + 1);
  });
});
