/**
 * The request and response shapes of edge-infer and cloud-infer: the Open Inference Protocol v2
 * (KServe, Triton) and the simple `{"instances": [...]}` form. Parsing checks the envelope with
 * zod and the numbers with one loop (zod over 50,000 numbers would cost more than the model):
 * every sample must be `width` finite numbers, given flat or nested as rows.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { parseInput } from '../schema/index.js';

/** A batch of samples as the models take it. */
interface Batch {
  /** rows x width, row-major. */
  input: Float32Array;
  rows: number;
  /** The request's id (OIP), echoed in the answer. */
  id: string | undefined;
  form: 'v2' | 'instances';
  /** OIP: the outputs the caller asked for (all when it named none). */
  outputs?: ReadonlySet<string>;
}

/** The outputs an OIP answer can carry, in the order they are written. */
const outputNames = [
  'probabilities',
  'label',
  'tier',
  'hard',
  'fallback',
  'edge_label',
  'cloud_label',
] as const;

const tensorSchema = z.object({
  name: z.string().min(1).max(64),
  shape: z.array(z.number().int().min(0)).min(1).max(4),
  datatype: z.string(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  // Checked number by number by fill(); z.array would copy tens of thousands of items first.
  data: z.custom<unknown[]>((value) => Array.isArray(value), 'expected an array'),
});

const v2Request = z.object({
  id: z.string().max(256).optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  inputs: z
    .array(tensorSchema)
    .min(1, 'one input tensor is required')
    .max(1, 'this model takes one input'),
  outputs: z.array(z.object({ name: z.string() }).loose()).optional(),
});

const instancesRequest = z.object({ instances: z.array(z.unknown()) });

const floatTypes = new Set(['FP32', 'FP64', 'FP16']);

/** Flattens `value` (numbers, or arrays of them at any depth) into `out` from `offset`. */
function fill(value: unknown, out: Float32Array, offset: number, where: string): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new ValidationError(`${where}: not a finite number`);
    if (offset >= out.length)
      throw new ValidationError(`${where}: more values than the shape holds`);
    out[offset] = value;
    return offset + 1;
  }
  if (!Array.isArray(value)) {
    throw new ValidationError(
      `${where}: expected a number, got ${value === null ? 'null' : typeof value}`,
    );
  }
  let at = offset;
  for (let i = 0; i < value.length; i += 1) {
    const item: unknown = value[i];
    if (typeof item === 'number' && Number.isFinite(item) && at < out.length) out[at++] = item;
    else at = fill(item, out, at, `${where}[${i}]`);
  }
  return at;
}

/** Shapes a [N, width] model accepts: [N, width], or an image [N, h, w] / [N, 1, h, w] with h*w = width. */
function batchRows(shape: readonly number[], width: number, where: string): number {
  const [n, ...rest] = shape;
  const per = rest.reduce((a, b) => a * b, 1);
  const ok = rest.length >= 1 && per === width && (rest.length < 3 || rest[0] === 1);
  if (n === undefined || !ok) {
    throw new ValidationError(
      `${where}: shape ${JSON.stringify(shape)} does not fit this model: expected [N, ${width}] (or [N, 28, 28], [N, 1, 28, 28] for ${width} pixels)`,
    );
  }
  return n;
}

function checkRows(rows: number, maxBatch: number, where: string): void {
  if (rows === 0) throw new ValidationError(`${where}: empty batch`);
  if (rows > maxBatch)
    throw new ValidationError(`${where}: batch of ${rows} is over the limit of ${maxBatch}`);
}

/**
 * The binary tensor extension (Triton, KServe): the input's data follows the JSON header as raw
 * little-endian FP32, sized by `parameters.binary_data_size`. No JSON number parsing: what makes
 * large batches cheap.
 */
function binaryTensor(
  tensor: z.output<typeof tensorSchema>,
  binary: Uint8Array,
  rows: number,
  width: number,
): Float32Array {
  const size = tensor.parameters?.['binary_data_size'];
  if (tensor.datatype !== 'FP32') {
    throw new ValidationError(
      `body.inputs[0].datatype: binary data must be FP32, got ${tensor.datatype}`,
    );
  }
  if (tensor.data.length > 0) {
    throw new ValidationError('body.inputs[0].data: must be empty when the data is sent as binary');
  }
  const expected = rows * width * 4;
  if (size !== expected || binary.length !== expected) {
    throw new ValidationError(
      `body.inputs[0].parameters.binary_data_size: expected ${expected} bytes for shape ${JSON.stringify(tensor.shape)}, got ${String(size)} declared and ${binary.length} sent`,
    );
  }
  // Viewed in place when the data is 4-byte aligned in the body, else copied once.
  const input =
    (binary.byteOffset & 3) === 0
      ? new Float32Array(binary.buffer, binary.byteOffset, rows * width)
      : new Float32Array(rows * width);
  if (input.buffer !== binary.buffer) new Uint8Array(input.buffer).set(binary);
  // NaN and the infinities are the floats whose exponent bits are all ones.
  const bits = new Uint32Array(input.buffer, input.byteOffset, input.length);
  for (let i = 0; i < bits.length; i += 1) {
    if ((bits[i]! & 0x7f800000) === 0x7f800000) {
      throw new ValidationError(`body.inputs[0] binary value ${i}: not a finite number`);
    }
  }
  return input;
}

/**
 * Parses either request form into a batch of `width`-feature samples; `binary` is what followed
 * the JSON header when the binary tensor extension is used.
 */
function parseInferRequest(
  body: unknown,
  width: number,
  maxBatch: number,
  binary?: Uint8Array,
): Batch {
  if (typeof body === 'object' && body !== null && 'instances' in body) {
    const { instances } = parseInput(instancesRequest, body, 'body');
    checkRows(instances.length, maxBatch, 'body.instances');
    const input = new Float32Array(instances.length * width);
    instances.forEach((instance, i) => {
      const end = fill(instance, input, i * width, `body.instances[${i}]`);
      if (end !== (i + 1) * width) {
        throw new ValidationError(
          `body.instances[${i}]: expected ${width} numbers, got ${end - i * width}`,
        );
      }
    });
    return { input, rows: instances.length, id: undefined, form: 'instances' };
  }
  const request = parseInput(v2Request, body, 'body');
  const only = request.inputs[0]!;
  const wanted = request.outputs?.map((o) => o.name);
  const unknown = wanted?.find((name) => !(outputNames as readonly string[]).includes(name));
  if (unknown !== undefined) {
    throw new ValidationError(
      `body.outputs: ${unknown} is not an output of this model (${outputNames.join(', ')})`,
    );
  }
  const outputs = wanted === undefined || wanted.length === 0 ? undefined : new Set(wanted);
  if (!floatTypes.has(only.datatype)) {
    throw new ValidationError(
      `body.inputs[0].datatype: ${only.datatype} is not accepted; send FP32 (or FP64, FP16)`,
    );
  }
  const rows = batchRows(only.shape, width, 'body.inputs[0].shape');
  checkRows(rows, maxBatch, 'body.inputs[0].shape');
  if (binary !== undefined) {
    return {
      input: binaryTensor(only, binary, rows, width),
      rows,
      id: request.id,
      form: 'v2',
      ...(outputs === undefined ? {} : { outputs }),
    };
  }
  const input = new Float32Array(rows * width);
  const end = fill(only.data, input, 0, 'body.inputs[0].data');
  if (end !== input.length) {
    throw new ValidationError(
      `body.inputs[0].data: expected ${input.length} numbers for shape ${JSON.stringify(only.shape)}, got ${end}`,
    );
  }
  return { input, rows, id: request.id, form: 'v2', ...(outputs === undefined ? {} : { outputs }) };
}

/** What one sample's answer says: the final class and who gave it. */
interface SampleResult {
  probabilities: Float32Array;
  tier: 'edge' | 'cloud';
  hard: boolean;
  /** The cloud failed and the edge result stands in for it. */
  fallback: boolean;
  edge: Float32Array | undefined;
  cloud: Float32Array | undefined;
}

function argmax(p: ArrayLike<number>): number {
  let best = 0;
  for (let k = 1; k < p.length; k += 1) if (p[k]! > p[best]!) best = k;
  return best;
}

const round = (v: number) => Math.round(v * 1e6) / 1e6;
const roundAll = (p: ArrayLike<number>) => Array.from(p, round);

/** The answer in the request's form. */
function formatInferResponse(
  batch: Pick<Batch, 'id' | 'form' | 'outputs'>,
  model: { name: string; version: string },
  results: readonly SampleResult[],
): unknown {
  if (batch.form === 'instances') {
    return {
      predictions: results.map((r) => ({
        label: argmax(r.probabilities),
        probabilities: roundAll(r.probabilities),
        tier: r.tier,
        hard: r.hard,
        fallback: r.fallback,
        edge:
          r.edge === undefined ? null : { label: argmax(r.edge), confidence: Math.max(...r.edge) },
        cloud:
          r.cloud === undefined
            ? null
            : { label: argmax(r.cloud), confidence: Math.max(...r.cloud) },
      })),
    };
  }
  const n = results.length;
  const width = results[0]?.probabilities.length ?? 0;
  // One pass: this runs for every sample of every batch. Probabilities, the costly output,
  // only when asked for.
  const withProbabilities = batch.outputs?.has('probabilities') ?? true;
  const probabilities = new Array<number>(withProbabilities ? n * width : 0);
  const labels = new Array<number>(n);
  const tiers = new Array<string>(n);
  const hard = new Array<boolean>(n);
  const fallback = new Array<boolean>(n);
  const edgeLabels = new Array<number>(n);
  const cloudLabels = new Array<number>(n);
  results.forEach((r, i) => {
    if (withProbabilities) {
      for (let k = 0; k < width; k += 1) probabilities[i * width + k] = round(r.probabilities[k]!);
    }
    labels[i] = argmax(r.probabilities);
    tiers[i] = r.tier;
    hard[i] = r.hard;
    fallback[i] = r.fallback;
    edgeLabels[i] =
      r.edge === undefined ? -1 : r.edge === r.probabilities ? labels[i] : argmax(r.edge);
    cloudLabels[i] =
      r.cloud === undefined ? -1 : r.cloud === r.probabilities ? labels[i] : argmax(r.cloud);
  });
  return {
    model_name: model.name,
    model_version: model.version,
    ...(batch.id === undefined ? {} : { id: batch.id }),
    outputs: [
      { name: 'probabilities', datatype: 'FP32', shape: [n, width], data: probabilities },
      { name: 'label', datatype: 'INT32', shape: [n], data: labels },
      { name: 'tier', datatype: 'BYTES', shape: [n], data: tiers },
      { name: 'hard', datatype: 'BOOL', shape: [n], data: hard },
      { name: 'fallback', datatype: 'BOOL', shape: [n], data: fallback },
      { name: 'edge_label', datatype: 'INT32', shape: [n], data: edgeLabels },
      { name: 'cloud_label', datatype: 'INT32', shape: [n], data: cloudLabels },
    ].filter((output) => batch.outputs?.has(output.name) ?? true),
  };
}

/** OIP model metadata for a [N, width] -> [N, classes] model. */
function modelMetadata(model: {
  name: string;
  version: string;
  inputWidth: number;
  outputWidth: number;
}) {
  return {
    name: model.name,
    versions: [model.version],
    platform: 'onnxruntime_onnx',
    inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, model.inputWidth] }],
    outputs: [{ name: 'probabilities', datatype: 'FP32', shape: [-1, model.outputWidth] }],
  };
}

export { parseInferRequest, formatInferResponse, modelMetadata, argmax, outputNames };
export type { Batch, SampleResult };
