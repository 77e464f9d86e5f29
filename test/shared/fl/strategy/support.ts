/** Small models and updates written out by hand for the strategy tests. */
import { expect } from 'vitest';
import type { WeightUpdate } from '../../../../shared/fl/fedavg.js';
import type { NamedTensors, Tensor } from '../../../../shared/fl/weights.js';

/** A model of tensors named and shaped [n] from plain arrays, in the given order. */
function model(tensors: Record<string, number[]>): Map<string, Tensor> {
  return new Map(
    Object.entries(tensors).map(([name, values]) => [
      name,
      { dims: [values.length], values: Float32Array.from(values) },
    ]),
  );
}

function update(worker: string, samples: number, tensors: Record<string, number[]>): WeightUpdate {
  return { worker, samples, weights: model(tensors) };
}

/** Every value of `got` within `tolerance` of `expected`, tensor by tensor, names and order too. */
function expectClose(
  got: NamedTensors,
  expected: Record<string, number[]>,
  tolerance = 1e-6,
): void {
  expect([...got.keys()]).toEqual(Object.keys(expected));
  for (const [name, values] of Object.entries(expected)) {
    const tensor = got.get(name)!;
    expect(tensor.dims).toEqual([values.length]);
    values.forEach((v, i) => {
      const diff = Math.abs(tensor.values[i]! - v);
      if (!(diff <= tolerance)) {
        throw new Error(`${name}[${i}] is ${tensor.values[i]}, expected ${v} (off by ${diff})`);
      }
    });
  }
}

/** The bytes of every tensor, to compare two results for bit-identity. */
const bytesOf = (tensors: NamedTensors) =>
  Buffer.concat(
    [...tensors.values()].map((t) =>
      Buffer.from(t.values.buffer, t.values.byteOffset, t.values.byteLength),
    ),
  );

export { model, update, expectClose, bytesOf };
