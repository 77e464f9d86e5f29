/**
 * Tensors as the serving path carries them, in the Open Inference Protocol's terms: a datatype
 * name (BOOL, UINT8..UINT64, INT8..INT64, FP16, FP32, FP64, BYTES), a shape and the elements in
 * row-major order, held in the typed array the binary tensor extension is made of (FP16 as its
 * 16-bit patterns, BOOL as one byte each, INT64 as BigInt64Array, BYTES as strings). A model's
 * signature says what it takes and gives, with -1 for a dimension the model leaves open.
 */
import { ValidationError } from '../errors/index.js';

const datatypes = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
] as const;
type Datatype = (typeof datatypes)[number];

type NumericData =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array;
type BigData = BigInt64Array | BigUint64Array;
type TensorData = NumericData | BigData | string[];

interface Tensor {
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  readonly data: TensorData;
}

/** One input or output of a model; -1 marks a dimension the model leaves open. */
interface TensorSpec {
  readonly name: string;
  readonly datatype: Datatype;
  readonly shape: readonly number[];
}

/**
 * What a model takes and gives. `batched`: every input and output has an open first dimension,
 * so requests can be joined and split along it (dynamic batching, per-sample offload); a model
 * without one is run one request at a time, each request being one sample.
 */
interface Signature {
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  readonly batched: boolean;
}

type Constructor = new (length: number) => NumericData | BigData;

const constructors: Readonly<Record<Exclude<Datatype, 'BYTES'>, Constructor>> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
};

function isDatatype(value: string): value is Datatype {
  return (datatypes as readonly string[]).includes(value);
}

/** Bytes per element in the binary extension; BYTES elements carry their own length. */
function elementBytes(datatype: Exclude<Datatype, 'BYTES'>): number {
  return (constructors[datatype] as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT;
}

function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** A zeroed tensor's storage for `length` elements. */
function allocate(datatype: Datatype, length: number): TensorData {
  if (datatype === 'BYTES') return new Array<string>(length).fill('');
  return new constructors[datatype](length);
}

/**
 * `count` elements of a fixed-size datatype read from `bytes` (little-endian, as the binary
 * extension and every host Node runs on in practice): viewed in place when the bytes are aligned
 * for the type, else copied once.
 */
function fromBytes(datatype: Exclude<Datatype, 'BYTES'>, bytes: Uint8Array, count: number) {
  const Typed = constructors[datatype] as unknown as {
    new (buffer: ArrayBufferLike, offset: number, length: number): NumericData | BigData;
    new (length: number): NumericData | BigData;
  };
  if (bytes.byteOffset % elementBytes(datatype) === 0) {
    return new Typed(bytes.buffer, bytes.byteOffset, count);
  }
  const out = new Typed(count);
  new Uint8Array(out.buffer, out.byteOffset, out.byteLength).set(bytes);
  return out;
}

/** Rows `start` to `end` along the first dimension (shares memory for typed arrays). */
function sliceRows(tensor: Tensor, start: number, end: number): Tensor {
  const rows = tensor.shape[0] ?? 1;
  const per = rows === 0 ? 0 : tensor.data.length / rows;
  return {
    datatype: tensor.datatype,
    shape: [end - start, ...tensor.shape.slice(1)],
    data: tensor.data.slice(start * per, end * per),
  };
}

/** The rows at `indices`, in that order. */
function pickRows(tensor: Tensor, indices: readonly number[]): Tensor {
  const rows = tensor.shape[0] ?? 1;
  const per = rows === 0 ? 0 : tensor.data.length / rows;
  const out = allocate(tensor.datatype, indices.length * per);
  indices.forEach((row, i) => copyInto(out, tensor.data, row * per, per, i * per));
  return {
    datatype: tensor.datatype,
    shape: [indices.length, ...tensor.shape.slice(1)],
    data: out,
  };
}

function copyInto(
  out: TensorData,
  from: TensorData,
  start: number,
  length: number,
  at: number,
): void {
  if (Array.isArray(out)) {
    const strings = from as string[];
    for (let k = 0; k < length; k += 1) out[at + k] = strings[start + k]!;
  } else {
    (out as Float32Array).set((from as Float32Array).subarray(start, start + length), at);
  }
}

/** Joins tensors of the same datatype and trailing dimensions along the first dimension. */
function concatRows(parts: readonly Tensor[]): Tensor {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  const rows = parts.reduce((n, t) => n + (t.shape[0] ?? 1), 0);
  const length = parts.reduce((n, t) => n + t.data.length, 0);
  const out = allocate(first.datatype, length);
  let at = 0;
  for (const part of parts) {
    copyInto(out, part.data, 0, part.data.length, at);
    at += part.data.length;
  }
  return { datatype: first.datatype, shape: [rows, ...first.shape.slice(1)], data: out };
}

/** Whether `shape` fits `spec` (same rank; open dimensions take any size). */
function fitsShape(spec: readonly number[], shape: readonly number[]): boolean {
  return spec.length === shape.length && spec.every((d, i) => d === -1 || d === shape[i]);
}

/**
 * Checks a request's tensor against the model's input: datatype and shape, naming the input and
 * both sides. `where` is the request field the message points at.
 */
function checkTensor(spec: TensorSpec, tensor: Pick<Tensor, 'datatype' | 'shape'>, where: string) {
  if (tensor.datatype !== spec.datatype) {
    throw new ValidationError(
      `${where}: input ${spec.name} takes datatype ${spec.datatype}, got ${tensor.datatype}`,
    );
  }
  if (!fitsShape(spec.shape, tensor.shape)) {
    throw new ValidationError(
      `${where}: input ${spec.name} takes shape ${JSON.stringify(spec.shape)} (-1: any size), got ${JSON.stringify(tensor.shape)}`,
    );
  }
  // An empty open dimension (an image of width 0) breaks models inside their graph; the batch
  // dimension is checked with the batch.
  const empty = tensor.shape.findIndex((d, i) => i > 0 && d === 0 && spec.shape[i] === -1);
  if (empty > 0) {
    throw new ValidationError(
      `${where}: input ${spec.name} has an empty dimension ${empty} in shape ${JSON.stringify(tensor.shape)}`,
    );
  }
}

/**
 * IEEE 754 half-precision bits for a number (round to nearest even), as the binary form holds.
 * Rounded once, from the double itself: going through float32 first rounded twice, and a value
 * just above a half-way point between two halves (1 + 2^-11 + 2^-40) fell to the even neighbour
 * below instead of the nearest one above.
 */
function toHalf(value: number): number {
  if (Number.isNaN(value)) return 0x7e00;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const a = Math.abs(value);
  // 65520 is half-way between the largest half (65504) and 2^16: it and above round to infinity.
  if (a >= 65520) return sign | 0x7c00;
  // Below 2^-14 halves are subnormal, in steps of 2^-24; above, 11 significant bits. Scaling
  // by a power of two is exact, so `scaled - whole` is the exact rest to round on.
  let exponent = -14;
  if (a >= 2 ** -14) {
    exponent = Math.floor(Math.log2(a));
    if (2 ** exponent > a) exponent -= 1;
    else if (2 ** (exponent + 1) <= a) exponent += 1;
  }
  const scaled = a * 2 ** (10 - exponent);
  let whole = Math.floor(scaled);
  const rest = scaled - whole;
  if (rest > 0.5 || (rest === 0.5 && (whole & 1) === 1)) whole += 1;
  // A normal number's leading bit is implicit; rounding up to 2^11 carries into the exponent.
  return a < 2 ** -14 ? sign | whole : sign | (((exponent + 15) << 10) + whole - 1024);
}

/** The number a half-precision bit pattern stands for. */
function fromHalf(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** The elements as plain numbers (FP16 decoded, 64-bit integers rounded), for task adapters. */
function numbersOf(tensor: Tensor): ArrayLike<number> {
  const { data, datatype } = tensor;
  if (Array.isArray(data)) {
    throw new ValidationError(`a ${datatype} tensor holds strings, not numbers`);
  }
  if (datatype === 'FP16') return Float32Array.from(data as Uint16Array, fromHalf);
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    return Float64Array.from(data, (v) => Number(v));
  }
  return data;
}

export {
  datatypes,
  fromBytes,
  isDatatype,
  elementBytes,
  elementCount,
  allocate,
  sliceRows,
  pickRows,
  concatRows,
  checkTensor,
  toHalf,
  fromHalf,
  numbersOf,
};
export type { Datatype, Tensor, TensorData, TensorSpec, Signature, NumericData };
