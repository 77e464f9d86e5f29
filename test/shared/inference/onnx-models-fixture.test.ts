/**
 * The test models of test/support/onnx-models.ts, loaded and run in-process by onnxruntime-node:
 * each one's metadata (names, types, shapes with symbolic dims as strings) and outputs are what
 * its TSDoc says, for every OIP datatype at ranks 0, 1, 2 and 4. The last block pins the
 * onnxruntime-node 1.30 behaviours recorded in test/fixtures/ort-datatypes.md, so an upgrade
 * that changes one fails here rather than in a server.
 */
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import {
  fixedBatchModel,
  identityModel,
  imageModel,
  mismatchedBatchModel,
  multiIoModel,
  oipDatatypes,
  ortTypeOf,
} from '../../support/onnx-models.js';
import type { OipDatatype } from '../../support/onnx-models.js';

/** A tensor of `n` edge-case values of one datatype, and the JS array class ORT returns for it. */
function sampleTensor(datatype: OipDatatype, dims: number[]): { tensor: Tensor; array: string } {
  const n = dims.reduce((a, b) => a * b, 1);
  const at = <T>(values: T[], i: number): T => values[i % values.length]!;
  switch (datatype) {
    case 'BOOL':
      return {
        tensor: new Tensor(
          'bool',
          Uint8Array.from({ length: n }, (_, i) => i % 2),
          dims,
        ),
        array: 'Uint8Array',
      };
    case 'UINT8':
      return {
        tensor: new Tensor(
          'uint8',
          Uint8Array.from({ length: n }, (_, i) => 255 - i),
          dims,
        ),
        array: 'Uint8Array',
      };
    case 'UINT16':
      return {
        tensor: new Tensor(
          'uint16',
          Uint16Array.from({ length: n }, (_, i) => 65535 - i),
          dims,
        ),
        array: 'Uint16Array',
      };
    case 'UINT32':
      return {
        tensor: new Tensor(
          'uint32',
          Uint32Array.from({ length: n }, (_, i) => 2 ** 32 - 1 - i),
          dims,
        ),
        array: 'Uint32Array',
      };
    case 'UINT64':
      return {
        tensor: new Tensor(
          'uint64',
          BigUint64Array.from({ length: n }, (_, i) => 2n ** 64n - 1n - BigInt(i)),
          dims,
        ),
        array: 'BigUint64Array',
      };
    case 'INT8':
      return {
        tensor: new Tensor(
          'int8',
          Int8Array.from({ length: n }, (_, i) => -128 + i),
          dims,
        ),
        array: 'Int8Array',
      };
    case 'INT16':
      return {
        tensor: new Tensor(
          'int16',
          Int16Array.from({ length: n }, (_, i) => -32768 + i),
          dims,
        ),
        array: 'Int16Array',
      };
    case 'INT32':
      return {
        tensor: new Tensor(
          'int32',
          Int32Array.from({ length: n }, (_, i) => -(2 ** 31) + i),
          dims,
        ),
        array: 'Int32Array',
      };
    case 'INT64':
      return {
        tensor: new Tensor(
          'int64',
          BigInt64Array.from({ length: n }, (_, i) => -(2n ** 63n) + BigInt(i)),
          dims,
        ),
        array: 'BigInt64Array',
      };
    case 'FP16':
      // IEEE half bit patterns: 1.0, -2.0, +inf, a NaN, 65504 (max), smallest subnormal.
      return {
        tensor: new Tensor(
          'float16',
          Uint16Array.from({ length: n }, (_, i) =>
            at([0x3c00, 0xc000, 0x7c00, 0x7e00, 0x7bff, 0x0001], i),
          ),
          dims,
        ),
        array: 'Uint16Array',
      };
    case 'FP32':
      return {
        tensor: new Tensor(
          'float32',
          Float32Array.from({ length: n }, (_, i) => at([0.5, -1e30, Infinity, -0, 1e-40], i)),
          dims,
        ),
        array: 'Float32Array',
      };
    case 'FP64':
      return {
        tensor: new Tensor(
          'float64',
          Float64Array.from({ length: n }, (_, i) => at([0.1, -1e300, -Infinity, 5e-324], i)),
          dims,
        ),
        array: 'Float64Array',
      };
    case 'BYTES':
      return {
        tensor: new Tensor(
          'string',
          Array.from({ length: n }, (_, i) => at(['', 'héllo', '日本語', '🙂', 'plain'], i)),
          dims,
        ),
        array: 'Array',
      };
  }
}

const elements = (data: Tensor['data']): unknown[] => Array.from(data as ArrayLike<unknown>);

const ranks: Array<{ rank: number; declared: Array<number | string>; fed: number[] }> = [
  { rank: 0, declared: [], fed: [] },
  { rank: 1, declared: ['N'], fed: [5] },
  { rank: 2, declared: ['N', 3], fed: [2, 3] },
  { rank: 4, declared: ['N', 2, 'H', 'W'], fed: [1, 2, 3, 2] },
];

async function withSession<T>(
  model: Uint8Array,
  body: (session: InferenceSession) => Promise<T>,
): Promise<T> {
  const session = await InferenceSession.create(model);
  try {
    return await body(session);
  } finally {
    await session.release();
  }
}

describe('identityModel', () => {
  const cases = oipDatatypes.flatMap((datatype) => ranks.map((r) => ({ datatype, ...r })));

  it.each(cases)(
    '$datatype rank $rank: metadata and an unchanged round trip',
    async ({ datatype, declared, fed }) => {
      await withSession(identityModel({ datatype, shape: declared }), async (session) => {
        const type = ortTypeOf(datatype);
        expect(session.inputNames).toEqual(['input']);
        expect(session.outputNames).toEqual(['output']);
        expect(session.inputMetadata).toEqual([
          { name: 'input', isTensor: true, type, shape: declared },
        ]);
        expect(session.outputMetadata).toEqual([
          { name: 'output', isTensor: true, type, shape: declared },
        ]);
        const { tensor, array } = sampleTensor(datatype, fed);
        const output = (await session.run({ input: tensor }))['output']!;
        expect(output.type).toBe(type);
        expect(output.dims).toEqual(fed);
        expect(output.data.constructor.name).toBe(array);
        expect(elements(output.data)).toEqual(elements(tensor.data));
      });
    },
  );

  it('names its ends as asked and keeps fixed dims as numbers', async () => {
    const model = identityModel({
      datatype: 'INT32',
      shape: ['batch', 7],
      inputName: 'in:0',
      outputName: 'out/1',
    });
    await withSession(model, async (session) => {
      expect(session.inputMetadata).toEqual([
        { name: 'in:0', isTensor: true, type: 'int32', shape: ['batch', 7] },
      ]);
      expect(session.outputMetadata).toEqual([
        { name: 'out/1', isTensor: true, type: 'int32', shape: ['batch', 7] },
      ]);
    });
  });
});

describe('multiIoModel', () => {
  it('declares two inputs and three outputs of different types and ranks', async () => {
    await withSession(multiIoModel(), async (session) => {
      expect(session.inputMetadata).toEqual([
        { name: 'a', isTensor: true, type: 'float32', shape: ['N', 3] },
        { name: 'b', isTensor: true, type: 'int64', shape: ['N'] },
      ]);
      expect(session.outputMetadata).toEqual([
        { name: 'sum', isTensor: true, type: 'float32', shape: ['N', 3] },
        { name: 'b_twice', isTensor: true, type: 'int64', shape: ['N'] },
        { name: 'flag', isTensor: true, type: 'bool', shape: ['N'] },
      ]);
    });
  });

  it('computes sum = a + float(b) per row, b_twice = 2b and flag = b > 0', async () => {
    await withSession(multiIoModel(), async (session) => {
      const result = await session.run({
        a: new Tensor('float32', Float32Array.from([1, 2, 3, 4, 5, 6, 0.5, 0.5, 0.5]), [3, 3]),
        b: new Tensor('int64', BigInt64Array.from([-1n, 0n, 10n]), [3]),
      });
      expect(Object.keys(result).sort()).toEqual(['b_twice', 'flag', 'sum']);
      expect(result['sum']!.dims).toEqual([3, 3]);
      expect(result['sum']!.data).toEqual(Float32Array.from([0, 1, 2, 4, 5, 6, 10.5, 10.5, 10.5]));
      expect(result['b_twice']!.dims).toEqual([3]);
      expect(result['b_twice']!.data).toEqual(BigInt64Array.from([-2n, 0n, 20n]));
      expect(result['flag']!.type).toBe('bool');
      expect(result['flag']!.data).toEqual(Uint8Array.from([0, 0, 1]));
    });
  });
});

describe('fixedBatchModel', () => {
  it('doubles a [1, 4] input and rejects any other batch', async () => {
    await withSession(fixedBatchModel(), async (session) => {
      expect(session.inputMetadata).toEqual([
        { name: 'x', isTensor: true, type: 'float32', shape: [1, 4] },
      ]);
      expect(session.outputMetadata).toEqual([
        { name: 'y', isTensor: true, type: 'float32', shape: [1, 4] },
      ]);
      const y = (await session.run({ x: new Tensor(Float32Array.from([1, -2, 3.5, 0]), [1, 4]) }))[
        'y'
      ]!;
      expect(y.dims).toEqual([1, 4]);
      expect(y.data).toEqual(Float32Array.from([2, -4, 7, 0]));
      await expect(session.run({ x: new Tensor(new Float32Array(8), [2, 4]) })).rejects.toThrow(
        'index: 0 Got: 2 Expected: 1',
      );
    });
  });
});

describe('imageModel', () => {
  it('averages each channel over H and W, for any N, H and W', async () => {
    await withSession(imageModel(), async (session) => {
      expect(session.inputMetadata).toEqual([
        { name: 'image', isTensor: true, type: 'float32', shape: ['N', 3, 'H', 'W'] },
      ]);
      expect(session.outputMetadata).toEqual([
        { name: 'channel_mean', isTensor: true, type: 'float32', shape: ['N', 3] },
      ]);
      // [2, 3, 2, 2] holding 0..23: each channel is 4 consecutive values, mean = first + 1.5.
      const small = await session.run({
        image: new Tensor(
          Float32Array.from({ length: 24 }, (_, i) => i),
          [2, 3, 2, 2],
        ),
      });
      expect(small['channel_mean']!.dims).toEqual([2, 3]);
      expect(small['channel_mean']!.data).toEqual(
        Float32Array.from([1.5, 5.5, 9.5, 13.5, 17.5, 21.5]),
      );
      // [1, 3, 1, 5]: channel c is all c + 1.
      const wide = await session.run({
        image: new Tensor(
          Float32Array.from({ length: 15 }, (_, i) => Math.floor(i / 5) + 1),
          [1, 3, 1, 5],
        ),
      });
      expect(wide['channel_mean']!.dims).toEqual([1, 3]);
      expect(wide['channel_mean']!.data).toEqual(Float32Array.from([1, 2, 3]));
    });
  });
});

describe('mismatchedBatchModel', () => {
  it('sums over the batch into one [1, 2] row, whatever N is', async () => {
    await withSession(mismatchedBatchModel(), async (session) => {
      expect(session.inputMetadata).toEqual([
        { name: 'x', isTensor: true, type: 'float32', shape: ['N', 2] },
      ]);
      expect(session.outputMetadata).toEqual([
        { name: 'total', isTensor: true, type: 'float32', shape: [1, 2] },
      ]);
      const total = (
        await session.run({ x: new Tensor(Float32Array.from([1, 2, 3, 4, 5, 6]), [3, 2]) })
      )['total']!;
      expect(total.dims).toEqual([1, 2]);
      expect(total.data).toEqual(Float32Array.from([9, 12]));
    });
  });
});

describe('onnxruntime-node 1.30 behaviours a server relies on (test/fixtures/ort-datatypes.md)', () => {
  it('takes float16 only as Uint16Array bit patterns', () => {
    expect(() => new Tensor('float16', [1, 2], [2])).toThrow(
      'Creating a float16 tensor from number array is not supported',
    );
    expect(
      () => new Tensor('float16', Float32Array.from([1]) as unknown as Uint16Array, [1]),
    ).toThrow("A float16 tensor's data must be type of function Uint16Array()");
  });

  it('passes bool bytes other than 0 and 1 through an Identity unchanged', async () => {
    await withSession(identityModel({ datatype: 'BOOL', shape: ['N'] }), async (session) => {
      const input = new Tensor('bool', Uint8Array.from([0, 1, 2, 255]), [4]);
      const output = (await session.run({ input }))['output']!;
      expect(output.data).toEqual(Uint8Array.from([0, 1, 2, 255]));
      expect(new Tensor('bool', [true, false], [2]).data).toEqual(Uint8Array.from([1, 0]));
    });
  });

  it('keeps non-ASCII and empty strings but cuts a string at its first NUL', async () => {
    await withSession(identityModel({ datatype: 'BYTES', shape: ['N'] }), async (session) => {
      const strings = ['', 'héllo', '日本語', '🙂', '\n', 'a\u0000b', '\ud800x'];
      const input = new Tensor('string', strings, [strings.length]);
      const output = (await session.run({ input }))['output']!;
      expect(output.data).toEqual(['', 'héllo', '日本語', '🙂', '\n', 'a', '\ufffdx']);
      const empty = (await session.run({ input: new Tensor('string', [], [0]) }))['output']!;
      expect(empty.dims).toEqual([0]);
      expect(empty.data).toEqual([]);
    });
  });

  it('does not check the shape of a rank-0 input: a [2] feed runs and comes back [2]', async () => {
    await withSession(identityModel({ datatype: 'FP32', shape: [] }), async (session) => {
      const input = new Tensor('float32', Float32Array.from([3, 4]), [2]);
      const output = (await session.run({ input }))['output']!;
      expect(output.dims).toEqual([2]);
      // `new Tensor(data)` without dims is rank 1, [length], not a scalar.
      expect(new Tensor('float32', Float32Array.from([3])).dims).toEqual([1]);
    });
  });

  it('rejects a wrong dtype, rank or fixed dim, and a missing input, with these messages', async () => {
    await withSession(identityModel({ datatype: 'FP32', shape: ['N', 3] }), async (session) => {
      const feed = (tensor: Tensor) => session.run({ input: tensor });
      await expect(feed(new Tensor('float64', new Float64Array(6), [2, 3]))).rejects.toThrow(
        'Unexpected input data type. Actual: (tensor(double)) , expected: (tensor(float))',
      );
      await expect(feed(new Tensor('float32', new Float32Array(6), [6]))).rejects.toThrow(
        'Invalid rank for input: input Got: 1 Expected: 2 Please fix either the inputs/outputs or the model.',
      );
      await expect(feed(new Tensor('float32', new Float32Array(8), [2, 4]))).rejects.toThrow(
        'Got invalid dimensions for input: input for the following indices\n index: 1 Got: 4 Expected: 3\n Please fix either the inputs/outputs or the model.',
      );
      await expect(session.run({})).rejects.toThrow("input 'input' is missing in 'feeds'.");
      await expect(feed(new Tensor('float32', new Float32Array(0), [0, 3]))).resolves.toEqual({
        output: expect.objectContaining({ dims: [0, 3] }) as unknown,
      });
    });
  });

  it('ignores feeds whose names are not inputs, and does not tie symbolic dims across inputs', async () => {
    await withSession(multiIoModel(), async (session) => {
      const result = await session.run({
        a: new Tensor(new Float32Array(6), [2, 3]),
        b: new Tensor(BigInt64Array.from([1n]), [1]),
        unknown: new Tensor(new Float32Array(1), [1]),
      });
      // N = 2 for `a` and N = 1 for `b`: Add broadcasts instead of failing.
      expect(result['sum']!.dims).toEqual([2, 3]);
      expect(result['b_twice']!.dims).toEqual([1]);
    });
  });
});
