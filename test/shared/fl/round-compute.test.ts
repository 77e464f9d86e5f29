/** A round's computation: the start-up warm-up reads the Dataset once and changes no round. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeDatasetCsv } from '../../../shared/fl/dataset-file.js';
import { cachedDatasetReader, readDataset } from '../../../shared/fl/dataset-source.js';
import type { DatasetReader } from '../../../shared/fl/dataset-source.js';
import { computeRound, decodeModel, warmUp } from '../../../shared/fl/round-compute.js';
import { seededRandom } from '../../../shared/random/index.js';
import { loadMnist } from '../../../shared/training/data.js';
import { Network } from '../../../shared/training/network.js';
import { exportOnnx } from '../../../shared/training/onnx-export.js';

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
