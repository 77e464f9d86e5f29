/**
 * The Open Inference Protocol v2 REST messages (KServe, Triton), both ends: the server parses
 * requests and writes answers, the edge's cloud client writes requests and parses answers, with
 * the same code. Tensors travel as JSON `data` (nested or flat) or in the binary tensor extension
 * (raw little-endian elements after the JSON header, `binary_data_size` per tensor, BYTES as a
 * 4-byte length before each element). Parsing checks the envelope with zod and the elements with
 * one loop (zod over 50,000 numbers would cost more than the model), and checks every input
 * against the model's signature, naming the input and what was expected.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { parseInput } from '../schema/index.js';
import { firstNotFinite, notFinite } from './finite.js';
import type { FiniteCheck } from './finite.js';
import {
  allocate,
  checkTensor,
  elementBytes,
  elementCount,
  fromBytes,
  fromHalf,
  isDatatype,
  toHalf,
} from './tensor.js';
import type { Datatype, Signature, Tensor, TensorData, TensorSpec } from './tensor.js';

const binaryFlag = z.boolean().optional();
const tensorParameters = z
  .object({ binary_data_size: z.number().int().min(0).optional(), binary_data: binaryFlag })
  .loose()
  .optional();

/** One tensor of a request or an answer: `data` is checked element by element, not by zod. */
const tensorSchema = z.object({
  name: z.string().min(1).max(256),
  shape: z.array(z.number().int().min(0)).max(16),
  datatype: z.string(),
  parameters: tensorParameters,
  // KServe's client sends `"data": null` beside `binary_data_size: 0` for an empty tensor.
  data: z
    .custom<unknown[]>((value) => Array.isArray(value), 'expected an array')
    .nullable()
    .optional(),
});

/** The infer request (OIP v2 §"Inference Request JSON Object"). */
const inferRequestSchema = z.object({
  id: z.string().max(256).optional(),
  parameters: z.object({ binary_data_output: binaryFlag }).loose().optional(),
  inputs: z.array(tensorSchema).min(1, 'at least one input tensor is required').max(64),
  outputs: z
    .array(z.object({ name: z.string().min(1).max(256), parameters: tensorParameters }).loose())
    .max(64)
    .optional(),
});

/** The infer answer (OIP v2 §"Inference Response JSON Object"). */
const inferResponseSchema = z.object({
  model_name: z.string(),
  model_version: z.string().optional(),
  id: z.string().optional(),
  outputs: z.array(tensorSchema),
});

/** A parsed infer request: its inputs checked against the model, and what the caller wants back. */
interface InferRequest {
  id: string | undefined;
  inputs: Record<string, Tensor>;
  /** The first dimension shared by every input of a batched model; 1 for a model without one. */
  rows: number;
  /** The outputs asked for, in the asked order; undefined: every output. */
  outputs: readonly string[] | undefined;
  /** Outputs to send as raw bytes after the JSON header. */
  binaryOutputs: ReadonlySet<string>;
  /**
   * Binary FP32/FP64 inputs whose finiteness is left to whoever runs them (finite.ts), when the
   * caller asked for that (`deferFinite`); absent or empty: every element was checked.
   */
  unchecked?: readonly FiniteCheck[];
}

const show = (shape: readonly number[]) => JSON.stringify(shape);

const intRanges: Readonly<Partial<Record<Datatype, readonly [number, number]>>> = {
  UINT8: [0, 255],
  UINT16: [0, 65535],
  UINT32: [0, 4294967295],
  INT8: [-128, 127],
  INT16: [-32768, 32767],
  INT32: [-2147483648, 2147483647],
  UINT64: [0, Number.MAX_SAFE_INTEGER],
  INT64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
};

/** onnxruntime's string tensors end each element at its first NUL: refused, not truncated. */
const nulProblem = 'a BYTES element holds a NUL byte, which ONNX string tensors cannot carry';

/** Writes one JSON element into `out[at]`, or says why it cannot. */
type Store = (out: TensorData, at: number, value: unknown) => string | undefined;

function numberStore(datatype: 'FP16' | 'FP32' | 'FP64'): Store {
  return (out, at, value) => {
    if (typeof value !== 'number' || !Number.isFinite(value)) return 'expected a finite number';
    // A finite JSON number past FP32's or FP16's range would be stored as infinity, which the
    // binary form refuses and a JSON answer cannot carry: refused here too.
    if (datatype === 'FP16') {
      const bits = toHalf(value);
      if ((bits & 0x7c00) === 0x7c00) return 'expected a finite number within FP16 range (±65504)';
      (out as Uint16Array)[at] = bits;
      return undefined;
    }
    (out as Float64Array)[at] = value;
    if (!Number.isFinite(out[at]))
      return 'expected a finite number within FP32 range (±3.4028235e38)';
    return undefined;
  };
}

function intStore(datatype: Datatype): Store {
  const [min, max] = intRanges[datatype]!;
  const big = datatype === 'INT64' || datatype === 'UINT64';
  return (out, at, value) => {
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      // JSON numbers past 2^53 are rounded by every JavaScript parser: such 64-bit values can
      // only arrive exactly as binary data.
      return big
        ? typeof value === 'number' && Number.isInteger(value)
          ? `${value < 0 ? 'below' : 'past'} the integers JSON carries exactly (|n| < 2^53): send binary data for such 64-bit values`
          : `expected an integer in [${min}, ${max}]`
        : `expected an integer in [${min}, ${max}]`;
    }
    if (big) (out as BigInt64Array)[at] = BigInt(value);
    else (out as Int32Array)[at] = value;
    return undefined;
  };
}

const stores: Readonly<Record<Datatype, Store>> = {
  BOOL: (out, at, value) => {
    if (typeof value !== 'boolean') return 'expected true or false';
    (out as Uint8Array)[at] = value ? 1 : 0;
    return undefined;
  },
  UINT8: intStore('UINT8'),
  UINT16: intStore('UINT16'),
  UINT32: intStore('UINT32'),
  UINT64: intStore('UINT64'),
  INT8: intStore('INT8'),
  INT16: intStore('INT16'),
  INT32: intStore('INT32'),
  INT64: intStore('INT64'),
  FP16: numberStore('FP16'),
  FP32: numberStore('FP32'),
  FP64: numberStore('FP64'),
  BYTES: (out, at, value) => {
    if (typeof value !== 'string') return 'expected a string';
    if (value.includes('\0')) return nulProblem;
    (out as string[])[at] = value;
    return undefined;
  },
};

/**
 * The deepest nesting of JSON tensor data read (OIP `data`, the instances form): a tensor has
 * at most this many dimensions here. 32 is NumPy's limit before 2.0 and twice the 16 dimensions
 * an OIP shape may have (tensorSchema); no model comes near it, and it bounds the recursion of
 * every walker over received data to 32 frames, where a 20,000-deep array overflowed the stack.
 */
const maxNesting = 32;

/** The refusal of data nested past maxNesting, at `where`. */
function tooDeep(where: string): ValidationError {
  return new ValidationError(
    `${where}: nested deeper than ${maxNesting} levels (a tensor has at most ${maxNesting} dimensions)`,
  );
}

/**
 * A received value as an error message shows it, bounded: primitives as JSON (long strings
 * cut), arrays and objects by kind only, since stringifying them walks them without bound.
 */
function preview(value: unknown): string {
  // String(): JSON.stringify writes the Infinity that JSON.parse makes of 1e400 as null.
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}...` : value);
  }
  if (Array.isArray(value)) return `an array of ${value.length} values`;
  if (typeof value === 'object' && value !== null) return 'an object';
  return String(value);
}

/**
 * Flattens `value` (elements, or arrays of them nested up to maxNesting deep: OIP allows nested
 * or flat data) into `out` from `offset`; returns the next offset. `depth` is the nesting of
 * `value` itself (1 for the `data` array). FP32 numbers take a fast path: they are most of what
 * arrives as JSON.
 */
function fill(
  value: unknown,
  out: TensorData,
  offset: number,
  store: Store,
  where: string,
  depth: number,
): number {
  if (!Array.isArray(value)) {
    if (offset >= out.length)
      throw new ValidationError(`${where}: more values than the ${out.length} the shape holds`);
    const problem = store(out, offset, value);
    if (problem !== undefined)
      throw new ValidationError(`${where}: ${problem}, got ${preview(value)}`);
    return offset + 1;
  }
  if (depth > maxNesting) throw tooDeep(where);
  let at = offset;
  const fast = out instanceof Float32Array ? out : undefined;
  for (let i = 0; i < value.length; i += 1) {
    const item: unknown = value[i];
    if (fast !== undefined && typeof item === 'number' && at < fast.length) {
      fast[at] = item;
      // Not finite (past FP32's range, or 1e400 read as infinity): the slow path says why.
      if (Number.isFinite(fast[at])) {
        at += 1;
        continue;
      }
    }
    at = fill(item, out, at, store, `${where}[${i}]`, depth + 1);
  }
  return at;
}

/** BYTES elements from the binary form: each a 4-byte little-endian length, then the bytes. */
function readBytesElements(bytes: Uint8Array, count: number, where: string): string[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Array<string>(count);
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let at = 0;
  for (let i = 0; i < count; i += 1) {
    if (at + 4 > bytes.length) {
      throw new ValidationError(`${where}: binary BYTES data ends inside element ${i} of ${count}`);
    }
    const length = view.getUint32(at, true);
    at += 4;
    if (at + length > bytes.length) {
      throw new ValidationError(
        `${where}: binary BYTES element ${i} claims ${length} bytes past the data's end`,
      );
    }
    let text: string;
    try {
      text = decoder.decode(bytes.subarray(at, at + length));
    } catch {
      throw new ValidationError(`${where}: binary BYTES element ${i} is not UTF-8 text`);
    }
    if (text.includes('\0')) throw new ValidationError(`${where}: element ${i}: ${nulProblem}`);
    out[i] = text;
    at += length;
  }
  if (at !== bytes.length) {
    throw new ValidationError(
      `${where}: ${bytes.length - at} bytes left after ${count} BYTES elements`,
    );
  }
  return out;
}

/**
 * One tensor's elements from its binary slice. Fixed-size types are viewed in place when the
 * slice is aligned for them (the body reader aligns the first), else copied once. FP32 and FP64
 * elements are checked for finiteness unless `deferFinite` (finite.ts).
 */
function readBinary(
  datatype: Datatype,
  bytes: Uint8Array,
  count: number,
  where: string,
  deferFinite: boolean,
): TensorData {
  if (datatype === 'BYTES') return readBytesElements(bytes, count, where);
  const size = elementBytes(datatype);
  if (bytes.length !== count * size) {
    throw new ValidationError(
      `${where}: binary_data_size ${bytes.length} does not hold ${count} ${datatype} elements (${count * size} bytes)`,
    );
  }
  // Typed as FP32 for the checks below; each reads the view its datatype makes.
  const out = fromBytes(datatype, bytes, count) as Float32Array;
  if (datatype === 'BOOL') {
    const bytes = out as unknown as Uint8Array;
    const bad = bytes.findIndex((v) => v > 1);
    if (bad >= 0) {
      throw new ValidationError(
        `${where}: element ${bad} is ${bytes[bad]}, but a BOOL element is 0 or 1`,
      );
    }
  }
  if ((datatype === 'FP32' || datatype === 'FP64') && !deferFinite) {
    const bad = firstNotFinite(out);
    if (bad >= 0) throw notFinite(where, bad, out[bad]!);
  }
  if (datatype === 'FP16') {
    const bits = out as unknown as Uint16Array;
    const bad = bits.findIndex((v) => (v & 0x7c00) === 0x7c00);
    if (bad >= 0) {
      throw new ValidationError(
        `${where}: element ${bad} (bits 0x${bits[bad]!.toString(16)}) is not a finite number`,
      );
    }
  }
  return out;
}

/** The tensor a request's entry describes, its data read from JSON or from the binary part. */
function readTensor(
  entry: z.output<typeof tensorSchema>,
  datatype: Datatype,
  binary: { bytes: Uint8Array; at: number } | undefined,
  where: string,
  deferFinite: boolean,
): Tensor {
  const count = elementCount(entry.shape);
  const size = entry.parameters?.binary_data_size;
  if (size !== undefined) {
    if (entry.data !== undefined && entry.data !== null && entry.data.length > 0) {
      throw new ValidationError(`${where}.data: must be absent when the data is sent as binary`);
    }
    if (binary === undefined) {
      throw new ValidationError(
        `${where}.parameters.binary_data_size: binary data needs the Inference-Header-Content-Length header`,
      );
    }
    if (binary.at + size > binary.bytes.length) {
      throw new ValidationError(
        `${where}.parameters.binary_data_size: ${size} bytes declared, ${binary.bytes.length - binary.at} left in the body`,
      );
    }
    const slice = binary.bytes.subarray(binary.at, binary.at + size);
    binary.at += size;
    const data = readBinary(datatype, slice, count, where, deferFinite);
    return { datatype, shape: entry.shape, data };
  }
  if (entry.data === undefined || entry.data === null) {
    throw new ValidationError(
      `${where}.data: required (or parameters.binary_data_size for binary data)`,
    );
  }
  const data = allocate(datatype, count);
  const end = fill(entry.data, data, 0, stores[datatype], `${where}.data`, 1);
  if (end !== count) {
    throw new ValidationError(
      `${where}.data: expected ${count} values for shape ${show(entry.shape)}, got ${end}`,
    );
  }
  return { datatype, shape: entry.shape, data };
}

function checkDatatype(datatype: string, where: string): Datatype {
  if (!isDatatype(datatype)) {
    throw new ValidationError(
      `${where}.datatype: ${JSON.stringify(datatype)} is not an OIP datatype`,
    );
  }
  return datatype;
}

/** The first dimension every input shares (batched models), or 1. */
function rowsOf(signature: Signature, inputs: Record<string, Tensor>, maxBatch: number): number {
  if (!signature.batched) return 1;
  const firsts = signature.inputs.map((spec) => [spec.name, inputs[spec.name]!.shape[0]!] as const);
  const [name, rows] = firsts[0]!;
  const other = firsts.find(([, n]) => n !== rows);
  if (other !== undefined) {
    throw new ValidationError(
      `body.inputs: inputs ${name} and ${other[0]} disagree on the batch dimension (${rows} and ${other[1]})`,
    );
  }
  if (rows === 0) throw new ValidationError(`body.inputs: input ${name} has an empty batch`);
  if (rows > maxBatch) {
    throw new ValidationError(`body.inputs: batch of ${rows} is over the limit of ${maxBatch}`);
  }
  return rows;
}

/**
 * Parses an infer request against the model: every input named once, with the model's datatype
 * and a shape its dimensions allow; `binary` is what followed the JSON header when the binary
 * extension is used (each binary input takes its `binary_data_size` bytes, in input order).
 * `served` are the outputs this endpoint can answer. With `deferFinite`, binary FP32 and FP64
 * inputs are not checked for finiteness here but listed in `unchecked`, for the inference thread
 * to check (finite.ts): the caller then passes them on to whatever runs the request.
 */
function parseInferRequest(
  body: unknown,
  model: { signature: Signature; served: readonly TensorSpec[]; maxBatch: number },
  binary?: Uint8Array,
  options: { deferFinite?: boolean } = {},
): InferRequest {
  const request = parseInput(inferRequestSchema, body, 'body');
  const { signature } = model;
  // Names, datatypes and shapes first (cheap), elements after: an oversize batch is refused
  // before any of its data is read.
  const shapes: Record<string, Tensor> = {};
  // Messages about one input's datatype and data name it first: "input x: body.inputs[0]...".
  const named = (i: number) => `input ${request.inputs[i]!.name}: body.inputs[${i}]`;
  const datatypes = request.inputs.map((entry, i) => {
    const where = `body.inputs[${i}]`;
    const spec = signature.inputs.find((s) => s.name === entry.name);
    if (spec === undefined) {
      throw new ValidationError(
        `${where}.name: ${entry.name} is not an input of this model (inputs: ${signature.inputs.map((s) => s.name).join(', ')})`,
      );
    }
    if (shapes[entry.name] !== undefined) {
      throw new ValidationError(`${where}.name: ${entry.name} given twice`);
    }
    const datatype = checkDatatype(entry.datatype, named(i));
    checkTensor(spec, { datatype, shape: entry.shape }, where);
    shapes[entry.name] = { datatype, shape: entry.shape, data: [] };
    return datatype;
  });
  const missing = signature.inputs.find((spec) => shapes[spec.name] === undefined);
  if (missing !== undefined) {
    throw new ValidationError(
      `body.inputs: input ${missing.name} (${missing.datatype} ${show(missing.shape)}) is missing`,
    );
  }
  const rows = rowsOf(signature, shapes, model.maxBatch);
  const inputs: Record<string, Tensor> = {};
  const part = binary === undefined ? undefined : { bytes: binary, at: 0 };
  const defer = options.deferFinite === true;
  const unchecked: FiniteCheck[] = [];
  request.inputs.forEach((entry, i) => {
    const datatype = datatypes[i]!;
    inputs[entry.name] = readTensor(entry, datatype, part, named(i), defer);
    const floats = datatype === 'FP32' || datatype === 'FP64';
    if (defer && floats && entry.parameters?.binary_data_size !== undefined) {
      unchecked.push({ input: entry.name, where: named(i) });
    }
  });
  if (part !== undefined && part.at !== part.bytes.length) {
    throw new ValidationError(
      `body: ${part.bytes.length - part.at} bytes after the JSON header are not claimed by any input's binary_data_size`,
    );
  }
  const servedNames = new Set(model.served.map((s) => s.name));
  const asked = request.outputs ?? [];
  const unknown = asked.find((o) => !servedNames.has(o.name));
  if (unknown !== undefined) {
    throw new ValidationError(
      `body.outputs: ${unknown.name} is not an output of this model (${[...servedNames].join(', ')})`,
    );
  }
  // Triton's classification extension (top-k "score:index" strings) is not served: refused by
  // name rather than answered with the raw scores the caller did not ask for.
  const classified = asked.findIndex((o) => o.parameters?.['classification'] !== undefined);
  if (classified >= 0) {
    throw new ValidationError(
      `body.outputs[${classified}].parameters.classification: the classification extension is not supported; ask for the output itself`,
    );
  }
  // Triton's rules: binary_data_output makes every output binary; an output's own binary_data
  // flag decides for that output.
  const allBinary = request.parameters?.binary_data_output === true;
  const binaryOutputs = new Set(
    model.served
      .map((s) => s.name)
      .filter((name) => asked.find((o) => o.name === name)?.parameters?.binary_data ?? allBinary),
  );
  return {
    id: request.id,
    inputs,
    rows,
    outputs: asked.length === 0 ? undefined : asked.map((o) => o.name),
    binaryOutputs,
    ...(unchecked.length === 0 ? {} : { unchecked }),
  };
}

const decimalScales = [1e6, 1e7, 1e8] as const;

/**
 * A short decimal that reads back as the same float32: JSON answers stay exact (a client
 * comparing with its own run sees no rounding), mostly without the double's 17 digits.
 */
function float32Text(value: number): string {
  // JSON has no NaN or infinity: such an output is null here (binary outputs carry it exactly).
  if (!Number.isFinite(value)) return 'null';
  // String(-0) is "0": the sign of zero would be lost.
  if (Object.is(value, -0)) return '-0';
  // Rounding to 6, 7 or 8 decimals and checking the round trip is ~15x faster than toPrecision
  // (this runs for every output value of every JSON answer); a value none of them keeps exactly
  // is written with the double's own shortest digits, which are exact too.
  for (const scale of decimalScales) {
    const rounded = Math.round(value * scale) / scale;
    if (Math.fround(rounded) === value) return String(rounded);
  }
  return String(value);
}

/** A tensor's elements as the text of a flat JSON array (64-bit integers exact). */
function jsonData(tensor: Tensor): string {
  const { data, datatype } = tensor;
  if (Array.isArray(data)) return JSON.stringify(data);
  const parts = new Array<string>(data.length);
  if (datatype === 'BOOL')
    for (let i = 0; i < data.length; i += 1) parts[i] = data[i] ? 'true' : 'false';
  else if (datatype === 'FP16') {
    for (let i = 0; i < data.length; i += 1)
      parts[i] = float32Text(Math.fround(fromHalf(data[i] as number)));
  } else if (datatype === 'FP32') {
    for (let i = 0; i < data.length; i += 1) parts[i] = float32Text(data[i] as number);
  } else if (datatype === 'FP64') {
    // String() is exact for doubles, but writes -0 as "0".
    for (let i = 0; i < data.length; i += 1) {
      const v = data[i] as number;
      parts[i] = Object.is(v, -0) ? '-0' : Number.isFinite(v) ? String(v) : 'null';
    }
  } else for (let i = 0; i < data.length; i += 1) parts[i] = String(data[i]);
  return `[${parts.join(',')}]`;
}

/** A tensor's elements in the binary extension's layout (host order: little-endian in practice). */
function binaryData(tensor: Tensor): Buffer {
  const { data } = tensor;
  if (!Array.isArray(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // BYTES: each element's length and UTF-8 bytes, written into one buffer, each distinct string
  // encoded once. Per-sample strings repeat a few values (tier is "edge" or "cloud"), and a
  // buffer per element joined by Buffer.concat cost ~12 us per 64 elements, against ~2.5 here.
  const encoded = new Map<string, Buffer>();
  const parts = data.map((text) => {
    let bytes = encoded.get(text);
    if (bytes === undefined) {
      bytes = Buffer.from(text, 'utf8');
      encoded.set(text, bytes);
    }
    return bytes;
  });
  const out = Buffer.allocUnsafe(parts.reduce((n, bytes) => n + 4 + bytes.length, 0));
  let at = 0;
  for (const bytes of parts) {
    out.writeUInt32LE(bytes.length, at);
    out.set(bytes, at + 4);
    at += 4 + bytes.length;
  }
  return out;
}

/** An answer: the JSON header's text, and when binary outputs were asked for, the bytes after it. */
interface InferAnswer {
  header: string;
  binary?: Buffer;
}

/** Writes tensors as OIP entries: JSON data, or a binary_data_size and bytes after the header. */
function writeTensors(
  named: ReadonlyArray<readonly [string, Tensor]>,
  binaryNames: ReadonlySet<string>,
): { entries: string; binary: Buffer[] } {
  const binary: Buffer[] = [];
  const entries = named.map(([name, tensor]) => {
    const head = `{"name":${JSON.stringify(name)},"datatype":"${tensor.datatype}","shape":${show(tensor.shape)}`;
    if (!binaryNames.has(name)) return `${head},"data":${jsonData(tensor)}}`;
    const bytes = binaryData(tensor);
    binary.push(bytes);
    return `${head},"parameters":{"binary_data_size":${bytes.length}}}`;
  });
  return { entries: entries.join(','), binary };
}

/** The answer to `request` from the model's (or the task's) output tensors. */
function formatInferResponse(
  request: Pick<InferRequest, 'id' | 'outputs' | 'binaryOutputs'>,
  model: { name: string; version: string; served: readonly TensorSpec[] },
  tensors: Readonly<Record<string, Tensor>>,
): InferAnswer {
  const names = request.outputs ?? model.served.map((s) => s.name);
  const named = names.flatMap((name) => {
    const tensor = tensors[name];
    return tensor === undefined ? [] : [[name, tensor] as const];
  });
  const { entries, binary } = writeTensors(named, request.binaryOutputs);
  const id = request.id === undefined ? '' : `,"id":${JSON.stringify(request.id)}`;
  const header = `{"model_name":${JSON.stringify(model.name)},"model_version":${JSON.stringify(model.version)}${id},"outputs":[${entries}]}`;
  return binary.length === 0 ? { header } : { header, binary: Buffer.concat(binary) };
}

/**
 * An infer request in the binary extension, as the edge sends hard samples to the cloud worker:
 * the body and the length of its JSON header (the Inference-Header-Content-Length).
 */
function encodeInferRequest(request: {
  id?: string;
  inputs: Readonly<Record<string, Tensor>>;
  outputs: readonly string[];
}): { body: Buffer; headerLength: number } {
  const { entries, binary } = writeTensors(
    Object.entries(request.inputs),
    new Set(Object.keys(request.inputs)),
  );
  const outputs = request.outputs
    .map((name) => `{"name":${JSON.stringify(name)},"parameters":{"binary_data":true}}`)
    .join(',');
  const id = request.id === undefined ? '' : `"id":${JSON.stringify(request.id)},`;
  const header = Buffer.from(`{${id}"inputs":[${entries}],"outputs":[${outputs}]}`);
  return { body: Buffer.concat([header, ...binary]), headerLength: header.length };
}

/** The same request as JSON data only (CloudEvents carry JSON). */
function inferRequestJson(request: {
  id?: string;
  inputs: Readonly<Record<string, Tensor>>;
}): unknown {
  const { entries } = writeTensors(Object.entries(request.inputs), new Set());
  return JSON.parse(
    `{${request.id === undefined ? '' : `"id":${JSON.stringify(request.id)},`}"inputs":[${entries}]}`,
  );
}

/** Parses an infer answer (JSON, or a header plus binary outputs) into its tensors by name. */
function parseInferResponse(
  body: Uint8Array,
  headerLength: number | undefined,
): Record<string, Tensor> {
  const headerBytes = headerLength === undefined ? body : body.subarray(0, headerLength);
  let json: unknown;
  try {
    json = JSON.parse(
      Buffer.from(headerBytes.buffer, headerBytes.byteOffset, headerBytes.length).toString('utf8'),
    );
  } catch {
    throw new ValidationError('answer: the JSON header does not parse');
  }
  const answer = parseInput(inferResponseSchema, json, 'answer');
  const part =
    headerLength === undefined ? undefined : { bytes: body.subarray(headerLength), at: 0 };
  const out: Record<string, Tensor> = {};
  answer.outputs.forEach((entry, i) => {
    const where = `output ${entry.name}: answer.outputs[${i}]`;
    out[entry.name] = readTensor(entry, checkDatatype(entry.datatype, where), part, where, false);
  });
  return out;
}

/** OIP model metadata: the truth about names, datatypes and shapes (-1 for open dimensions). */
function modelMetadata(model: {
  name: string;
  version: string;
  signature: Signature;
  served: readonly TensorSpec[];
}) {
  const entry = (spec: TensorSpec) => ({
    name: spec.name,
    datatype: spec.datatype,
    shape: [...spec.shape],
  });
  return {
    name: model.name,
    versions: [model.version],
    platform: 'onnxruntime_onnx',
    inputs: model.signature.inputs.map(entry),
    outputs: model.served.map(entry),
  };
}

/** Triton's names for the datatypes, in its model configuration. */
const tritonTypes: Readonly<Record<Datatype, string>> = {
  BOOL: 'TYPE_BOOL',
  UINT8: 'TYPE_UINT8',
  UINT16: 'TYPE_UINT16',
  UINT32: 'TYPE_UINT32',
  UINT64: 'TYPE_UINT64',
  INT8: 'TYPE_INT8',
  INT16: 'TYPE_INT16',
  INT32: 'TYPE_INT32',
  INT64: 'TYPE_INT64',
  FP16: 'TYPE_FP16',
  FP32: 'TYPE_FP32',
  FP64: 'TYPE_FP64',
  BYTES: 'TYPE_STRING',
};

/**
 * Triton's model configuration (its `GET /v2/models/{m}/config` extension, which tritonclient's
 * get_model_config reads): with a batch dimension, max_batch_size is set and dims leave it out.
 */
function modelConfig(model: {
  name: string;
  signature: Signature;
  served: readonly TensorSpec[];
  maxBatch: number;
}) {
  const { batched } = model.signature;
  const entry = (spec: TensorSpec) => ({
    name: spec.name,
    data_type: tritonTypes[spec.datatype],
    dims: batched ? spec.shape.slice(1) : [...spec.shape],
  });
  return {
    name: model.name,
    platform: 'onnxruntime_onnx',
    backend: 'onnxruntime',
    max_batch_size: batched ? model.maxBatch : 0,
    input: model.signature.inputs.map(entry),
    output: model.served.map(entry),
  };
}

export {
  maxNesting,
  preview,
  tooDeep,
  modelConfig,
  parseInferRequest,
  formatInferResponse,
  encodeInferRequest,
  inferRequestJson,
  parseInferResponse,
  modelMetadata,
  float32Text,
};
export type { InferRequest, InferAnswer };
