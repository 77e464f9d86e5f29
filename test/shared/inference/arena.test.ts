/** The input arena: requests joined back to back in shared memory, each input 8-byte aligned. */
import { describe, expect, it } from 'vitest';
import { InputArena } from '../../../shared/inference/arena.js';
import type { Tensor } from '../../../shared/inference/tensor.js';

const request = (rows: number, start: number): Record<string, Tensor> => ({
  flag: { datatype: 'BOOL', shape: [rows], data: Uint8Array.from({ length: rows }, () => 1) },
  count: {
    datatype: 'INT64',
    shape: [rows],
    data: BigInt64Array.from({ length: rows }, (_, i) => BigInt(start + i)),
  },
  word: { datatype: 'BYTES', shape: [rows], data: Array.from({ length: rows }, (_, i) => `w${i}`) },
  x: {
    datatype: 'FP32',
    shape: [rows, 2],
    data: Float32Array.from({ length: rows * 2 }, (_, i) => start + i / 10),
  },
});

describe('InputArena', () => {
  it('joins each input along the first dimension, 8-byte aligned, strings in the message', () => {
    const arena = new InputArena();
    const message = arena.pack(['flag', 'count', 'word', 'x'], [request(3, 0), request(2, 10)]);
    expect(message.arena).toBeInstanceOf(SharedArrayBuffer);
    const [flag, count, word, x] = message.inputs;
    // 5 BOOL bytes, padded to 8: INT64 starts aligned.
    expect(flag).toEqual({ name: 'flag', datatype: 'BOOL', shape: [5], offset: 0, length: 5 });
    expect(count).toEqual({ name: 'count', datatype: 'INT64', shape: [5], offset: 8, length: 5 });
    expect(word).toEqual({
      name: 'word',
      datatype: 'BYTES',
      shape: [5],
      strings: ['w0', 'w1', 'w2', 'w0', 'w1'],
    });
    expect(x).toMatchObject({ shape: [5, 2], offset: 48, length: 10 });
    const memory = message.arena!;
    expect(Array.from(new BigInt64Array(memory, 8, 5))).toEqual([0n, 1n, 2n, 10n, 11n]);
    expect(Array.from(new Float32Array(memory, 48, 10))).toEqual(
      [0, 0.1, 0.2, 0.3, 0.4, 0.5, 10, 10.1, 10.2, 10.3].map(Math.fround),
    );
  });

  it('sends its memory once, and new memory only when a run needs more', () => {
    const arena = new InputArena();
    const big = (rows: number): Record<string, Tensor> => ({
      x: { datatype: 'FP32', shape: [rows], data: new Float32Array(rows) },
    });
    expect(arena.pack(['x'], [big(16)]).arena?.byteLength).toBe(1 << 16);
    expect(arena.pack(['x'], [big(16)]).arena).toBeUndefined();
    // 80,000 floats: 320,000 bytes, doubled up to 512 KiB.
    expect(arena.pack(['x'], [big(40_000), big(40_000)]).arena?.byteLength).toBe(1 << 19);
    expect(arena.pack(['x'], [big(16)]).arena).toBeUndefined();
  });

  it('keeps the joined shape of a single request as it is (a model without a batch dimension)', () => {
    const arena = new InputArena();
    const scalar: Record<string, Tensor> = {
      s: { datatype: 'FP64', shape: [], data: Float64Array.of(2.5) },
    };
    const [s] = arena.pack(['s'], [scalar]).inputs;
    expect(s).toEqual({ name: 's', datatype: 'FP64', shape: [], offset: 0, length: 1 });
  });
});
