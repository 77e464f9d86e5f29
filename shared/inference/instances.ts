/**
 * The `{"instances": [...]}` request form (KServe's v1 protocol, TensorFlow Serving's row form):
 * one entry per sample, the sample itself for a one-input model or an object of inputs by name.
 * The answer is `{"predictions": [...]}`, one object per sample with each output's row. It is
 * the form a person types with curl; tools use the OIP v2 routes.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { parseInput } from '../schema/index.js';
import type { InferRequest } from './protocol.js';
import { float32Text, maxNesting, preview, tooDeep } from './protocol.js';
import { allocate, checkTensor, elementCount, fromHalf, toHalf } from './tensor.js';
import type { Datatype, Signature, Tensor, TensorSpec } from './tensor.js';

const instancesRequest = z.object({ instances: z.array(z.unknown()) });

/**
 * The nested shape of a JSON value: [2, 3] for [[1, 2, 3], [4, 5, 6]]; [] for a scalar. A value
 * nested deeper than `limit` is refused here, before anything walks it.
 */
function nestedShape(value: unknown, limit: number, where: string): number[] {
  const shape: number[] = [];
  let at = value;
  while (Array.isArray(at)) {
    if (shape.length === limit) throw tooDeep(where);
    shape.push(at.length);
    at = at[0];
  }
  return shape;
}

/** A finite number as `datatype` stores it; `fail` builds the refusal naming what was expected. */
function numeric(
  datatype: Datatype,
  value: number,
  fail: (expected: string) => ValidationError,
): number | bigint {
  // Past FP16's or FP32's range a finite number would be stored as infinity: refused, as the
  // OIP v2 routes refuse it (protocol.ts).
  if (datatype === 'FP16') {
    const bits = toHalf(value);
    if ((bits & 0x7c00) === 0x7c00) throw fail('a finite number within FP16 range (±65504)');
    return bits;
  }
  if (datatype === 'FP32' && !Number.isFinite(Math.fround(value))) {
    throw fail('a finite number within FP32 range (±3.4028235e38)');
  }
  if (datatype === 'FP32' || datatype === 'FP64') return value;
  if (!Number.isInteger(value)) throw fail('an integer');
  return datatype.endsWith('64') ? BigInt(value) : value;
}

function element(datatype: Datatype, value: unknown, where: string): number | bigint | string {
  const fail = (expected: string) =>
    new ValidationError(
      `${where}: expected ${expected}, got ${value === undefined ? 'nothing' : preview(value)}`,
    );
  if (datatype === 'BYTES') {
    if (typeof value !== 'string') throw fail('a string');
    return value;
  }
  if (datatype === 'BOOL') {
    if (typeof value !== 'boolean') throw fail('true or false');
    return value ? 1 : 0;
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) throw fail('a finite number');
  return numeric(datatype, value, fail);
}

/** Writes one sample's nested values into `out` from `offset`, checking the nesting as it goes. */
function write(
  value: unknown,
  shape: readonly number[],
  spec: TensorSpec,
  out: Tensor['data'],
  offset: number,
  where: string,
): number {
  if (shape.length === 0) {
    (out as unknown[])[offset] = element(spec.datatype, value, where);
    return offset + 1;
  }
  if (!Array.isArray(value) || value.length !== shape[0]) {
    throw new ValidationError(
      `${where}: expected ${shape[0]} values here (input ${spec.name} takes ${JSON.stringify(spec.shape)})`,
    );
  }
  let at = offset;
  value.forEach((item, i) => (at = write(item, shape.slice(1), spec, out, at, `${where}[${i}]`)));
  return at;
}

/** One input's tensor from every sample's value for it. */
function stack(
  spec: TensorSpec,
  values: readonly unknown[],
  batched: boolean,
  where: (i: number) => string,
): Tensor {
  // A sample of a batched model is a tensor less its batch dimension.
  const sampleShape = nestedShape(values[0], batched ? maxNesting - 1 : maxNesting, where(0));
  const shape = batched ? [values.length, ...sampleShape] : sampleShape;
  checkTensor(spec, { datatype: spec.datatype, shape }, where(0));
  const data = allocate(spec.datatype, elementCount(shape));
  const per = elementCount(sampleShape);
  values.forEach((value, i) => write(value, sampleShape, spec, data, i * per, where(i)));
  return { datatype: spec.datatype, shape, data };
}

/** Parses the instances form into a request for the model. */
function parseInstances(body: unknown, signature: Signature, maxBatch: number): InferRequest {
  const { instances } = parseInput(instancesRequest, body, 'body');
  if (instances.length === 0) throw new ValidationError('body.instances: empty batch');
  if (instances.length > maxBatch) {
    throw new ValidationError(
      `body.instances: batch of ${instances.length} is over the limit of ${maxBatch}`,
    );
  }
  if (!signature.batched && instances.length !== 1) {
    throw new ValidationError(
      'body.instances: this model has no batch dimension; send one instance',
    );
  }
  const single = signature.inputs.length === 1;
  const inputs: Record<string, Tensor> = {};
  for (const spec of signature.inputs) {
    const values = instances.map((instance, i) => {
      if (single) return instance;
      const value: unknown = (instance as Record<string, unknown> | null)?.[spec.name];
      if (value === undefined)
        throw new ValidationError(`body.instances[${i}].${spec.name}: missing`);
      return value;
    });
    inputs[spec.name] = stack(spec, values, signature.batched, (i) =>
      single ? `body.instances[${i}]` : `body.instances[${i}].${spec.name}`,
    );
  }
  return {
    id: undefined,
    inputs,
    rows: instances.length,
    outputs: undefined,
    binaryOutputs: new Set(),
  };
}

/** One element as JSON shows it. */
function shown(datatype: Datatype, value: number | bigint | string): unknown {
  if (typeof value === 'string') return value;
  if (datatype === 'BOOL') return value === 1;
  if (datatype === 'FP16') return Number(float32Text(Math.fround(fromHalf(Number(value)))));
  if (datatype === 'FP32') return Number(float32Text(Number(value)));
  return Number(value);
}

/**
 * Row `row` of a tensor, nested by its trailing dimensions (a scalar for a per-sample value); the
 * whole tensor when its first dimension is not the batch (a model without one).
 */
function rowValue(tensor: Tensor, row: number, rows: number): unknown {
  const batched = tensor.shape.length > 0 && tensor.shape[0] === rows;
  const rest = batched ? tensor.shape.slice(1) : tensor.shape;
  const per = batched ? tensor.data.length / rows : tensor.data.length;
  const flat = Array.from({ length: per }, (_, k) =>
    shown(tensor.datatype, tensor.data[row * per + k] as number | bigint | string),
  );
  const nest = (values: unknown[], dims: readonly number[]): unknown => {
    if (dims.length <= 1) return values;
    const size = values.length / dims[0]!;
    return Array.from({ length: dims[0]! }, (_, i) =>
      nest(values.slice(i * size, (i + 1) * size), dims.slice(1)),
    );
  };
  return rest.length === 0 ? flat[0] : nest(flat, rest);
}

/** The answer's `predictions`: per sample, each output's row by name. */
function formatPredictions(
  served: readonly TensorSpec[],
  tensors: Readonly<Record<string, Tensor>>,
  rows: number,
): { predictions: Array<Record<string, unknown>> } {
  return {
    predictions: Array.from({ length: rows }, (_, row) => {
      const prediction: Record<string, unknown> = {};
      for (const spec of served) {
        const tensor = tensors[spec.name];
        if (tensor !== undefined) prediction[spec.name] = rowValue(tensor, row, rows);
      }
      return prediction;
    }),
  };
}

export { parseInstances, formatPredictions };
