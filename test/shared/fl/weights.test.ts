/** The weights wire format: round trips, zero-copy views, and every refusal with its reason. */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { decodeWeights, encodeWeights } from '../../../shared/fl/weights.js';
import type { NamedTensors } from '../../../shared/fl/weights.js';

const limits = { maxBytes: 1 << 20, maxTensors: 16 };

function sample(): Map<string, { dims: number[]; values: Float32Array }> {
  return new Map([
    ['dense1.weight', { dims: [3, 2], values: Float32Array.of(1, -2, 3.5, 0, 1e-30, -7) }],
    ['dense1.bias', { dims: [2], values: Float32Array.of(0.25, -0.125) }],
    ['scalar', { dims: [], values: Float32Array.of(42) }],
    ['empty', { dims: [0, 4], values: new Float32Array(0) }],
  ]);
}

/** The encoding of `tensors` with its header fields or index rewritten by `edit`. */
function tampered(edit: (bytes: Uint8Array, view: DataView) => void): Uint8Array {
  const bytes = encodeWeights(sample());
  edit(bytes, new DataView(bytes.buffer, bytes.byteOffset));
  return bytes;
}

/** Re-encodes with the JSON index replaced (same padded length as the header says). */
function withIndex(index: unknown): Uint8Array {
  const bytes = encodeWeights(sample());
  const view = new DataView(bytes.buffer);
  const indexBytes = view.getUint32(8, true);
  const text = new TextEncoder().encode(JSON.stringify(index));
  const padded = (text.length + 3) & ~3;
  const data = bytes.subarray(16 + indexBytes);
  const out = new Uint8Array(16 + padded + data.length);
  out.set(bytes.subarray(0, 16));
  new DataView(out.buffer).setUint32(8, padded, true);
  out.fill(0x20, 16, 16 + padded);
  out.set(text, 16);
  out.set(data, 16 + padded);
  return out;
}

const refused = (bytes: Uint8Array, message: RegExp, custom = limits) => {
  expect(() => decodeWeights(bytes, custom)).toThrow(ValidationError);
  expect(() => decodeWeights(bytes, custom)).toThrow(message);
};

const entries = (tensors: NamedTensors) =>
  [...tensors].map(([name, t]) => [name, [...t.dims], [...t.values]]);

describe('weights wire format', () => {
  it('round-trips names, order, dims and values bit for bit', () => {
    const bytes = encodeWeights(sample());
    expect(bytes.length % 4).toBe(0);
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe('EAFW');
    expect(entries(decodeWeights(bytes, limits))).toEqual(entries(sample()));
  });

  it('decodes aligned bytes as views into them, unaligned ones as copies', () => {
    const bytes = encodeWeights(sample());
    const view = decodeWeights(bytes, limits).get('dense1.weight')!.values;
    expect(view.buffer).toBe(bytes.buffer);
    const shifted = new Uint8Array(bytes.length + 1).subarray(1);
    shifted.set(bytes);
    const copy = decodeWeights(shifted, limits).get('dense1.weight')!.values;
    expect(copy.buffer).not.toBe(shifted.buffer);
    expect([...copy]).toEqual([...view]);
  });

  it('refuses what is over the caller limits', () => {
    const bytes = encodeWeights(sample());
    refused(bytes, /over the limit of 100/, { maxBytes: 100, maxTensors: 16 });
    refused(bytes, /hold 4 tensors, over the limit of 3/, { maxBytes: 1 << 20, maxTensors: 3 });
  });

  it('refuses a short buffer, a wrong magic or version and a bad index length', () => {
    refused(new Uint8Array(8), /shorter than the 16-byte header/);
    refused(
      tampered((b) => b.set([0x50, 0x4b, 3, 4], 0)),
      /do not start with EAFW/,
    );
    refused(
      tampered((_, v) => v.setUint32(4, 2, true)),
      /version 2 is not 1/,
    );
    refused(
      tampered((_, v) => v.setUint32(8, 6, true)),
      /index of 6 bytes is not a multiple of 4/,
    );
    refused(
      tampered((_, v) => v.setUint32(8, 1 << 24, true)),
      /within the \d+ bytes/,
    );
    refused(
      tampered((_, v) => v.setUint32(12, 5, true)),
      /not an array of the header's 5 entries/,
    );
  });

  it('refuses a malformed index: JSON, entries, names, duplicates, dims', () => {
    refused(
      tampered((b) => b.set([0x7b], 16)),
      /index is not valid JSON/,
    );
    const good = withIndexEntries();
    refused(
      withIndex([...good.slice(0, 3), { name: 'empty' }]),
      /entry 3 is not \{name, dims, offset\}/,
    );
    refused(
      withIndex([{ ...good[0]!, name: '1bad name' }, ...good.slice(1)]),
      /tensor name "1bad name" is not/,
    );
    refused(
      withIndex([good[0]!, { ...good[1]!, name: 'dense1.weight' }, ...good.slice(2)]),
      /tensor dense1.weight appears twice/,
    );
    refused(
      withIndex([{ ...good[0]!, dims: [3, -2] }, ...good.slice(1)]),
      /dims \[3,-2\] are not integers >= 0/,
    );
    refused(
      withIndex([{ ...good[0]!, dims: [2, 1.5] }, ...good.slice(1)]),
      /dims \[2,1.5\] are not integers >= 0/,
    );
  });

  it('refuses offsets out of place, data past the end, and trailing bytes', () => {
    const good = withIndexEntries();
    refused(
      withIndex([good[0]!, { ...good[1]!, offset: 0 }, ...good.slice(2)]),
      /tensor dense1.bias: offset 0, expected 24/,
    );
    refused(
      withIndex([{ ...good[0]!, dims: [3, 3] }, ...good.slice(1)]),
      /tensor dense1.bias: offset 24, expected 36/,
    );
    refused(
      withIndex([...good.slice(0, 3), { ...good[3]!, dims: [1000, 4] }]),
      /tensor empty: 16000 bytes at data offset 36 run past the 36 data bytes/,
    );
    const bytes = encodeWeights(sample());
    const longer = new Uint8Array(bytes.length + 4);
    longer.set(bytes);
    refused(longer, /4 bytes after the last tensor/);
  });

  it('refuses non-finite values, naming the tensor and position', () => {
    const bytes = encodeWeights(sample());
    const values = decodeWeights(bytes, limits).get('dense1.bias')!.values;
    values[1] = NaN;
    refused(bytes, /tensor dense1.bias: value 1 is NaN, not finite/);
    values[1] = -Infinity;
    refused(bytes, /value 1 is -Infinity/);
  });

  it('refuses to encode dims that disagree with the values, a bad name or NaN', () => {
    const bad = (name: string, dims: number[], values: Float32Array) => () =>
      encodeWeights(new Map([[name, { dims, values }]]));
    expect(bad('w', [2, 2], new Float32Array(3))).toThrow(/dims \[2,2\] hold 4 values, got 3/);
    expect(bad('', [1], new Float32Array(1))).toThrow(/tensor name "" is not/);
    expect(bad('w', [1], Float32Array.of(Infinity))).toThrow(/value 0 is Infinity/);
  });
});

/** The index encodeWeights writes for `sample()`. */
function withIndexEntries(): Array<{ name: string; dims: number[]; offset: number }> {
  const bytes = encodeWeights(sample());
  const indexBytes = new DataView(bytes.buffer).getUint32(8, true);
  return JSON.parse(new TextDecoder().decode(bytes.subarray(16, 16 + indexBytes))) as Array<{
    name: string;
    dims: number[];
    offset: number;
  }>;
}
