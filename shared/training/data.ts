/**
 * The dataset: the `mnist` package's 10,000 digits (28x28, values 0..1), split by a fixed rule so
 * every run and every machine sees the same split: sample i of digit d goes to training when
 * i mod 20 < 14, to validation when it is 14-16, to test when it is 17-19 (70/15/15 per digit,
 * interleaved so any ordering in the source files spreads evenly).
 */
import { createRequire } from 'node:module';

const pixels = 28 * 28;
const classes = 10;

interface Split {
  /** n x 784 row-major pixels in [0, 1]. */
  x: Float32Array;
  /** n labels 0-9. */
  y: Uint8Array;
  n: number;
}

interface Dataset {
  train: Split;
  validation: Split;
  test: Split;
}

type SplitName = keyof Dataset;

interface MnistDigit {
  length: number;
  get(index: number): number[];
}

function splitOf(index: number): SplitName {
  const r = index % 20;
  return r < 14 ? 'train' : r < 17 ? 'validation' : 'test';
}

let cached: Dataset | undefined;

/** Loads and splits the digits (once per process). */
function loadMnist(): Dataset {
  if (cached !== undefined) return cached;
  const digits = createRequire(import.meta.url)('mnist') as MnistDigit[];
  const rows: Record<SplitName, Array<{ x: number[]; y: number }>> = {
    train: [],
    validation: [],
    test: [],
  };
  for (let d = 0; d < classes; d += 1) {
    const digit = digits[d]!;
    for (let i = 0; i < digit.length; i += 1) rows[splitOf(i)].push({ x: digit.get(i), y: d });
  }
  const pack = (items: Array<{ x: number[]; y: number }>): Split => {
    const x = new Float32Array(items.length * pixels);
    const y = new Uint8Array(items.length);
    items.forEach((item, i) => {
      x.set(item.x, i * pixels);
      y[i] = item.y;
    });
    return { x, y, n: items.length };
  };
  cached = { train: pack(rows.train), validation: pack(rows.validation), test: pack(rows.test) };
  return cached;
}

export { loadMnist, pixels, classes };
export type { Dataset, Split, SplitName };
