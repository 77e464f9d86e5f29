/**
 * A model's weights by name, and the bytes a trainer sends them in. The global model is ONNX and
 * its float32 initializers are what federated learning averages, so an update is just those
 * tensors: name, dims, float32 values. The wire format is a 16-byte header (magic `EAFW`, version,
 * index length, tensor count; little-endian u32s), a JSON index of names, dims and byte offsets
 * (space-padded to a multiple of 4), then every tensor's float32 little-endian values back to
 * back. Decoding checks every field against the caller's limits before it trusts a byte, and
 * returns views into the given bytes (no copy) when they are 4-byte aligned.
 */
import { ValidationError } from '../errors/index.js';

/** One tensor: row-major float32 values whose count is the product of `dims`. */
interface Tensor {
  readonly dims: readonly number[];
  readonly values: Float32Array;
}

/** Tensors by name, in the order they were added (a Map keeps insertion order). */
type NamedTensors = ReadonlyMap<string, Tensor>;

/** What a decoder accepts at most: the caller's budget for one message. */
interface DecodeLimits {
  /** Largest encoding accepted, in bytes. */
  readonly maxBytes: number;
  /** Most tensors accepted. */
  readonly maxTensors: number;
}

const magic = 'EAFW';
const version = 1;
const headerBytes = 16;
const maxRank = 8;
/** ONNX initializer names as our exports write them (dense1.weight) and a little more. */
const namePattern = /^[A-Za-z_][A-Za-z0-9_.:/-]{0,255}$/;

/** Whether this machine stores floats little-endian (typed arrays use the machine's order). */
const littleEndian = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

const align4 = (n: number) => (n + 3) & ~3;

/** Product of `dims`, or throws when a dim is not a non-negative integer or rank is too high. */
function elementCount(name: string, dims: readonly number[]): number {
  if (dims.length > maxRank) {
    throw new ValidationError(
      `tensor ${name}: rank ${dims.length} is over the limit of ${maxRank}`,
    );
  }
  let count = 1;
  for (const d of dims) {
    if (!Number.isSafeInteger(d) || d < 0) {
      throw new ValidationError(
        `tensor ${name}: dims ${JSON.stringify(dims)} are not integers >= 0`,
      );
    }
    count *= d;
  }
  if (!Number.isSafeInteger(count)) {
    throw new ValidationError(`tensor ${name}: dims ${JSON.stringify(dims)} are too large`);
  }
  return count;
}

/** Throws unless `name` is a tensor name we accept (ASCII, at most 256 characters). */
function checkName(name: string): void {
  if (!namePattern.test(name)) {
    throw new ValidationError(
      `tensor name ${JSON.stringify(name.slice(0, 300))} is not 1-256 characters of A-Z a-z 0-9 _ . : / - starting with a letter or _`,
    );
  }
}

/** Throws unless `tensor` has a valid name and as many values as its dims say. */
function checkTensor(name: string, tensor: EncodableTensor): number {
  checkName(name);
  const count = elementCount(name, tensor.dims);
  if (count !== tensor.values.length) {
    throw new ValidationError(
      `tensor ${name}: dims ${JSON.stringify(tensor.dims)} hold ${count} values, got ${tensor.values.length}`,
    );
  }
  return count;
}

/** Throws on the first NaN or infinity: one would poison every average it enters. */
function checkFinite(name: string, values: Float32Array): void {
  for (let i = 0; i < values.length; i += 1) {
    const v = values[i]!;
    if (v - v !== 0) throw new ValidationError(`tensor ${name}: value ${i} is ${v}, not finite`);
  }
}

/**
 * A tensor as encodeWeights takes it: float32 values, or a Network's float64 parameters, which
 * are written rounded to float32 (no float32 copy of them made first).
 */
interface EncodableTensor {
  readonly dims: readonly number[];
  readonly values: Float32Array | Float64Array;
}

/**
 * The wire encoding of `tensors` (header, JSON index, float32 little-endian data), written into
 * the bytes `memory` gives for its size (4-byte aligned; default: new memory). Names, dims,
 * value counts and finiteness (as float32) are checked here too, so a malformed update fails at
 * its sender.
 */
function encodeWeights(
  tensors: ReadonlyMap<string, EncodableTensor>,
  memory: (bytes: number) => Uint8Array = (bytes) => new Uint8Array(bytes),
): Uint8Array {
  const entries: Array<{ name: string; dims: number[]; offset: number }> = [];
  let dataBytes = 0;
  for (const [name, tensor] of tensors) {
    const count = checkTensor(name, tensor);
    entries.push({ name, dims: [...tensor.dims], offset: dataBytes });
    dataBytes += 4 * count;
  }
  const index = new TextEncoder().encode(JSON.stringify(entries));
  const dataStart = align4(headerBytes + index.length);
  const out = memory(dataStart + dataBytes);
  if (out.length !== dataStart + dataBytes || out.byteOffset % 4 !== 0)
    throw new RangeError(`encodeWeights: ${dataStart + dataBytes} aligned bytes were asked for`);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  out.set(new TextEncoder().encode(magic), 0);
  view.setUint32(4, version, true);
  view.setUint32(8, dataStart - headerBytes, true);
  view.setUint32(12, entries.length, true);
  out.set(index, headerBytes);
  out.fill(0x20, headerBytes + index.length, dataStart);
  let offset = dataStart;
  for (const [name, tensor] of tensors) {
    checkFinite(name, writeFloats(view, offset, tensor.values));
    offset += 4 * tensor.values.length;
  }
  return out;
}

/**
 * Writes `values` as float32 little-endian at byte `offset` (4-aligned) of `view`; returns what
 * was written, as float32s.
 */
function writeFloats(
  view: DataView,
  offset: number,
  values: Float32Array | Float64Array,
): Float32Array {
  if (littleEndian) {
    const written = new Float32Array(view.buffer, view.byteOffset + offset, values.length);
    written.set(values);
    return written;
  }
  for (let i = 0; i < values.length; i += 1) view.setFloat32(offset + 4 * i, values[i]!, true);
  return Float32Array.from(values);
}

/** `count` floats at `offset` of `bytes`: a view when aligned on a little-endian machine. */
function readFloats(bytes: Uint8Array, offset: number, count: number): Float32Array {
  const at = bytes.byteOffset + offset;
  if (littleEndian && at % 4 === 0) return new Float32Array(bytes.buffer, at, count);
  // Uint8Array's slice copies; a Node Buffer's (one from Redis, say) is a view into its pool.
  if (littleEndian)
    return new Float32Array(
      Uint8Array.prototype.slice.call(bytes, offset, offset + 4 * count).buffer,
    );
  const view = new DataView(bytes.buffer, at, 4 * count);
  return Float32Array.from({ length: count }, (_, i) => view.getFloat32(4 * i, true));
}

interface IndexEntry {
  name: string;
  dims: number[];
  offset: number;
}

/** The JSON index's entries, each checked for shape (not yet against the data). */
function parseIndex(text: string, count: number): IndexEntry[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ValidationError('weights index is not valid JSON');
  }
  if (!Array.isArray(parsed) || parsed.length !== count) {
    throw new ValidationError(`weights index is not an array of the header's ${count} entries`);
  }
  return parsed.map((entry: unknown, i) => {
    const e = entry as Partial<Record<keyof IndexEntry, unknown>> | null;
    if (
      typeof e !== 'object' ||
      e === null ||
      typeof e.name !== 'string' ||
      !Array.isArray(e.dims) ||
      !e.dims.every((d) => typeof d === 'number') ||
      typeof e.offset !== 'number'
    ) {
      throw new ValidationError(`weights index entry ${i} is not {name, dims, offset}`);
    }
    return { name: e.name, dims: e.dims, offset: e.offset };
  });
}

/** Checks the fixed header and returns the index's length and the tensor count. */
function readHeader(
  bytes: Uint8Array,
  limits: DecodeLimits,
): { indexBytes: number; count: number } {
  if (bytes.length > limits.maxBytes) {
    throw new ValidationError(
      `weights are ${bytes.length} bytes, over the limit of ${limits.maxBytes}`,
    );
  }
  if (bytes.length < headerBytes) {
    throw new ValidationError(
      `weights are ${bytes.length} bytes, shorter than the ${headerBytes}-byte header`,
    );
  }
  const found = new TextDecoder().decode(bytes.subarray(0, 4));
  if (found !== magic)
    throw new ValidationError(`weights do not start with ${magic} (got ${JSON.stringify(found)})`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, headerBytes);
  const got = view.getUint32(4, true);
  if (got !== version) throw new ValidationError(`weights version ${got} is not ${version}`);
  const indexBytes = view.getUint32(8, true);
  const count = view.getUint32(12, true);
  if (count > limits.maxTensors) {
    throw new ValidationError(
      `weights hold ${count} tensors, over the limit of ${limits.maxTensors}`,
    );
  }
  if (indexBytes % 4 !== 0 || headerBytes + indexBytes > bytes.length) {
    throw new ValidationError(
      `weights index of ${indexBytes} bytes is not a multiple of 4 within the ${bytes.length} bytes`,
    );
  }
  return { indexBytes, count };
}

/**
 * Reads bytes written by encodeWeights, refusing (ValidationError, naming the problem) anything
 * over `limits`, a wrong magic or version, a malformed index, a bad or repeated name, dims that
 * disagree with the data, an offset out of place, trailing bytes or a non-finite value. The
 * tensors are views into `bytes` when its offset is 4-byte aligned: do not reuse `bytes` after.
 */
function decodeWeights(bytes: Uint8Array, limits: DecodeLimits): Map<string, Tensor> {
  const { indexBytes, count } = readHeader(bytes, limits);
  const dataStart = headerBytes + indexBytes;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(headerBytes, dataStart));
  } catch {
    throw new ValidationError('weights index is not valid UTF-8');
  }
  const out = new Map<string, Tensor>();
  let expected = 0;
  for (const entry of parseIndex(text, count)) {
    checkName(entry.name);
    if (out.has(entry.name)) throw new ValidationError(`tensor ${entry.name} appears twice`);
    const values = elementCount(entry.name, entry.dims);
    if (entry.offset !== expected) {
      throw new ValidationError(
        `tensor ${entry.name}: offset ${entry.offset}, expected ${expected}`,
      );
    }
    if (dataStart + expected + 4 * values > bytes.length) {
      throw new ValidationError(
        `tensor ${entry.name}: ${4 * values} bytes at data offset ${expected} run past the ${bytes.length - dataStart} data bytes`,
      );
    }
    const tensor = { dims: entry.dims, values: readFloats(bytes, dataStart + expected, values) };
    checkFinite(entry.name, tensor.values);
    out.set(entry.name, tensor);
    expected += 4 * values;
  }
  if (dataStart + expected !== bytes.length) {
    throw new ValidationError(
      `weights have ${bytes.length - dataStart - expected} bytes after the last tensor`,
    );
  }
  return out;
}

export { encodeWeights, decodeWeights, checkFinite };
export type { EncodableTensor, Tensor, NamedTensors };
