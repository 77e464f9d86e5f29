/** A warm trainer's Dataset cache: the same file is parsed once; a changed file again. */
import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeDatasetCsv } from '../../../shared/fl/dataset-file.js';
import { cachedDatasetReader, readDataset } from '../../../shared/fl/dataset-source.js';
import type { DatasetReader } from '../../../shared/fl/dataset-source.js';

describe('the cached Dataset reader', () => {
  it('parses an unchanged file once, and a changed one again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fl-cache-'));
    const file = join(dir, 'd.csv');
    const split = (n: number) => ({ x: new Float32Array(n * 784), y: new Uint8Array(n), n });
    writeFileSync(file, writeDatasetCsv(split(2)));
    let reads = 0;
    const counting: DatasetReader = (source) => {
      reads += 1;
      return readDataset(source);
    };
    const read = cachedDatasetReader(counting);
    const source = { url: `file://${file}`, format: 'csv', maxBytes: 1 << 20 };
    expect((await read(source)).n).toBe(2);
    expect((await read(source)).n).toBe(2);
    expect(reads).toBe(1);
    writeFileSync(file, writeDatasetCsv(split(3)));
    utimesSync(file, new Date(), new Date(Date.now() + 5000));
    expect((await read(source)).n).toBe(3);
    expect(reads).toBe(2);
  });

  it('keeps what a read without classes parsed (a start-up read) and checks each caller classes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fl-cache-'));
    const file = join(dir, 'd.csv');
    const y = Uint8Array.from([0, 1, 7]);
    writeFileSync(file, writeDatasetCsv({ x: new Float32Array(3 * 784), y, n: 3 }));
    let reads = 0;
    const read = cachedDatasetReader((source) => {
      reads += 1;
      return readDataset(source);
    });
    const source = { url: `file://${file}`, format: 'csv', maxBytes: 1 << 20 };
    await read(source);
    expect((await read({ ...source, classes: 10 })).n).toBe(3);
    await expect(read({ ...source, classes: 5 })).rejects.toThrow(
      /sample 3 has label 7, the model has 5 classes/,
    );
    expect(reads).toBe(1);
  });
});
