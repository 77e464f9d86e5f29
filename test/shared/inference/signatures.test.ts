/**
 * Any ONNX signature, served: cloud-infer (task `raw`) on a real HTTP server with a real
 * onnxruntime, each answer compared with the same model run in-process (openOnnxModel). Every OIP
 * datatype × rank × encoding (JSON or binary, in and out) with each type's edge values; the model
 * metadata; a model with several inputs and outputs; every way a request can mismatch the
 * signature (a 400 naming the input, expected and received, and the server serving on); dynamic
 * batching (same sizes joined, different sizes never mixed, models without a batch dimension run
 * alone); and the instances form. The reference encodings here (half floats, binary layout,
 * exact JSON numbers) are written independently of shared/inference.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../../shared/http/index.js';
import {
  cloudInferDefinition,
  createInferencePool,
  createTaskAdapter,
} from '../../../shared/inference/index.js';
import type { InferencePool, Tensor } from '../../../shared/inference/index.js';
import { openOnnxModel } from '../../../shared/inference/onnx-runtime.js';
import type { OnnxSession } from '../../../shared/inference/onnx-runtime.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import {
  fixedBatchModel,
  identitiesModel,
  identityModel,
  imageModel,
  mismatchedBatchModel,
  multiIoModel,
  nonzeroIndicesModel,
  oipDatatypes,
} from '../../support/onnx-models.js';
import type { IdentityPair, OipDatatype } from '../../support/onnx-models.js';

// ---------------------------------------------------------------------------------------------
// Reference encodings, independent of shared/inference/tensor.ts and protocol.ts
// ---------------------------------------------------------------------------------------------

/** One element as the typed storage holds it: FP16 as its bits, 64-bit integers as BigInt. */
type Element = number | bigint | string;
type Storage = Tensor['data'];
type SmallDatatype = Exclude<OipDatatype, 'BYTES' | 'INT64' | 'UINT64'>;
type NumberArray = Exclude<Storage, string[] | BigInt64Array | BigUint64Array>;

const smallArrays: Readonly<Record<SmallDatatype, new (length: number) => NumberArray>> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
};

/** The value of a finite half-precision bit pattern (0x7c00 read as 65536, for rounding). */
function halfValue(bits: number): number {
  const magnitude = bits & 0x7fff;
  const exponent = magnitude >> 10;
  const fraction = magnitude & 0x3ff;
  const value = exponent === 0 ? fraction * 2 ** -24 : (1024 + fraction) * 2 ** (exponent - 25);
  return bits & 0x8000 ? -value : value;
}

/**
 * The half-precision bits nearest to `x` (ties to even), by binary search over the ordered
 * positive patterns and an exact midpoint (doubles hold every half and every midpoint exactly).
 */
function nearestHalf(x: number): number {
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  let lo = 0;
  let hi = 0x7c00;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (halfValue(mid) <= a) lo = mid;
    else hi = mid;
  }
  const midpoint = (halfValue(lo) + halfValue(hi)) / 2;
  const bits = a < midpoint ? lo : a > midpoint ? hi : (lo & 1) === 0 ? lo : hi;
  return sign | bits;
}

/** Typed storage for elements in storage form. */
function storageOf(datatype: OipDatatype, elements: readonly Element[]): Storage {
  if (datatype === 'BYTES') return elements.map(String);
  if (datatype === 'INT64') return BigInt64Array.from(elements, (e) => BigInt(e));
  if (datatype === 'UINT64') return BigUint64Array.from(elements, (e) => BigInt(e));
  const out = new smallArrays[datatype](elements.length);
  elements.forEach((e, i) => (out[i] = Number(e)));
  return out;
}

/** What a JSON value becomes in a tensor of `datatype` (FP16 and FP32 round to nearest even). */
function fromJson(datatype: OipDatatype, value: JsonScalar): Element {
  switch (datatype) {
    case 'BOOL':
      return value === true ? 1 : 0;
    case 'FP16':
      return nearestHalf(value as number);
    case 'FP32':
      return Math.fround(value as number);
    case 'INT64':
    case 'UINT64':
      return BigInt(value);
    default:
      return value as number | string;
  }
}

const elementAt = (data: Storage, i: number): Element => data[i]!;

/** The binary tensor extension's layout: raw little-endian elements; BYTES length-prefixed. */
function bytesOf(data: Storage): Uint8Array {
  if (!Array.isArray(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat(
    data.map((text) => {
      const utf8 = Buffer.from(text, 'utf8');
      const length = Buffer.alloc(4);
      length.writeUInt32LE(utf8.length);
      return Buffer.concat([length, utf8]);
    }),
  );
}

/** BYTES elements in the binary layout from raw element bytes (for bytes that are not UTF-8). */
function rawBytesElements(elements: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(
    elements.map((bytes) => {
      const length = Buffer.alloc(4);
      length.writeUInt32LE(bytes.length);
      return Buffer.concat([length, bytes]);
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// JSON with exact numbers: 64-bit integers past 2^53 and -0 survive (JSON.parse loses both)
// ---------------------------------------------------------------------------------------------

/** A JSON number as its text. Also written back verbatim (`1e400`, which JSON.stringify cannot). */
class Num {
  constructor(readonly text: string) {}
}
type Json = null | boolean | string | Num | Json[] | { [key: string]: Json };
type JsonScalar = number | boolean | string;

function parseExact(text: string): Json {
  const number = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
  let at = 0;
  const space = () => {
    while (at < text.length && ' \t\n\r'.includes(text[at]!)) at += 1;
  };
  const expect = (char: string) => {
    space();
    if (text[at] !== char) throw new Error(`JSON: expected ${char} at ${at}`);
    at += 1;
  };
  const value = (): Json => {
    space();
    const c = text[at];
    if (c === '{') {
      at += 1;
      const out: Record<string, Json> = {};
      space();
      if (text[at] === '}') return ((at += 1), out);
      for (;;) {
        const key = value();
        if (typeof key !== 'string') throw new Error(`JSON: key expected at ${at}`);
        expect(':');
        out[key] = value();
        space();
        if (text[at] === ',') at += 1;
        else return (expect('}'), out);
      }
    }
    if (c === '[') {
      at += 1;
      const out: Json[] = [];
      space();
      if (text[at] === ']') return ((at += 1), out);
      for (;;) {
        out.push(value());
        space();
        if (text[at] === ',') at += 1;
        else return (expect(']'), out);
      }
    }
    if (c === '"') {
      const start = at;
      at += 1;
      while (text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
      at += 1;
      return JSON.parse(text.slice(start, at)) as string;
    }
    for (const [word, meaning] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (text.startsWith(word, at)) return ((at += word.length), meaning);
    }
    number.lastIndex = at;
    const match = number.exec(text);
    if (match === null) throw new Error(`JSON: unexpected ${c ?? 'end'} at ${at}`);
    at += match[0].length;
    return new Num(match[0]);
  };
  const out = value();
  space();
  if (at !== text.length) throw new Error(`JSON: trailing text at ${at}`);
  return out;
}

/** JSON text that keeps -0 and writes Num verbatim; undefined fields are left out. */
function jsonText(value: unknown): string {
  if (value instanceof Num) return value.text;
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const fields = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function objectOf(value: Json | undefined): Record<string, Json> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Num)
    throw new Error(`expected a JSON object, got ${jsonText(value)}`);
  return value;
}
function arrayOf(value: Json | undefined): Json[] {
  if (!Array.isArray(value)) throw new Error(`expected a JSON array, got ${jsonText(value)}`);
  return value;
}
function numberOf(value: Json | undefined): number {
  if (!(value instanceof Num)) throw new Error(`expected a JSON number, got ${jsonText(value)}`);
  return Number(value.text);
}
const flatten = (value: Json): Json[] =>
  Array.isArray(value) ? value.flatMap((v) => flatten(v)) : [value];

/** Flat values nested by `shape` (OIP accepts both); a scalar stays a one-element array. */
function nest(flat: readonly unknown[], shape: readonly number[]): unknown[] {
  if (shape.length <= 1) return [...flat];
  const size = flat.length / shape[0]!;
  return Array.from({ length: shape[0]! }, (_, i) =>
    nest(flat.slice(i * size, (i + 1) * size), shape.slice(1)),
  );
}

// ---------------------------------------------------------------------------------------------
// Served answers compared with in-process runs
// ---------------------------------------------------------------------------------------------

/** Whether a served JSON element stands for the in-process element exactly. */
function sameElement(datatype: OipDatatype, got: Json, want: Element): boolean {
  switch (datatype) {
    case 'BOOL':
      return got === (want !== 0);
    case 'BYTES':
      return got === want;
    case 'FP16':
      return got instanceof Num && nearestHalf(Number(got.text)) === want;
    case 'FP32':
      return got instanceof Num && Object.is(Math.fround(Number(got.text)), want);
    case 'FP64':
      return got instanceof Num && Object.is(Number(got.text), want);
    default:
      return got instanceof Num && /^-?\d+$/.test(got.text) && BigInt(got.text) === BigInt(want);
  }
}

/** The elements that differ, as readable text (empty: equal). */
function differences(datatype: OipDatatype, got: readonly Json[], want: Storage): string[] {
  const out: string[] = [];
  if (got.length !== want.length) out.push(`${got.length} elements, expected ${want.length}`);
  for (let i = 0; i < Math.min(got.length, want.length) && out.length < 8; i += 1) {
    const expected = elementAt(want, i);
    if (!sameElement(datatype, got[i]!, expected)) {
      const shown = datatype === 'FP16' ? `0x${expected.toString(16)}` : String(expected);
      out.push(`[${i}]: got ${jsonText(got[i])}, expected ${shown}`);
    }
  }
  return out;
}

/** One output of an answer: JSON `data` (flattened) or its bytes in the binary part. */
interface ServedOutput {
  name: string;
  datatype: string;
  shape: number[];
  data?: Json[];
  bytes?: Uint8Array;
}

interface ServedAnswer {
  status: number;
  contentType: string | null;
  header: Record<string, Json>;
  outputs: ServedOutput[];
}

async function readAnswer(res: Response): Promise<ServedAnswer> {
  const body = new Uint8Array(await res.arrayBuffer());
  const length = res.headers.get('inference-header-content-length');
  const headerLength = length === null ? body.length : Number(length);
  const header = objectOf(parseExact(Buffer.from(body.subarray(0, headerLength)).toString()));
  let at = headerLength;
  const entries = header['outputs'] === undefined ? [] : arrayOf(header['outputs']);
  const outputs = entries.map((item) => {
    const entry = objectOf(item);
    const out: ServedOutput = {
      name: entry['name'] as string,
      datatype: entry['datatype'] as string,
      shape: arrayOf(entry['shape']).map(numberOf),
    };
    const parameters = entry['parameters'];
    if (parameters !== undefined && objectOf(parameters)['binary_data_size'] !== undefined) {
      const size = numberOf(objectOf(parameters)['binary_data_size']);
      out.bytes = body.subarray(at, at + size);
      at += size;
    } else out.data = flatten(entry['data'] ?? null);
    return out;
  });
  expect(at, 'every binary byte belongs to an output').toBe(body.length);
  return { status: res.status, contentType: res.headers.get('content-type'), header, outputs };
}

/** Asserts that `answer` holds exactly `names` (in order), each equal to the in-process tensor. */
function expectOutputs(
  answer: ServedAnswer,
  expected: Readonly<Record<string, Tensor>>,
  names: readonly string[],
  /** For FP32 outputs of a joined run: the largest absolute difference allowed. */
  tolerance?: number,
): void {
  expect(answer.status, jsonText(answer.header)).toBe(200);
  expect(answer.outputs.map((o) => o.name)).toEqual(names);
  for (const output of answer.outputs) {
    const want = expected[output.name]!;
    expect({ name: output.name, datatype: output.datatype, shape: output.shape }).toEqual({
      name: output.name,
      datatype: want.datatype,
      shape: want.shape,
    });
    const wanted = want.data;
    if (tolerance !== undefined && wanted instanceof Float32Array) {
      const got =
        output.bytes === undefined
          ? output.data!.map(numberOf)
          : Array.from(new Float32Array(Uint8Array.from(output.bytes).buffer));
      const far = got.filter((v, i) => !(Math.abs(v - wanted[i]!) <= tolerance));
      expect({ length: got.length, far }, output.name).toEqual({ length: wanted.length, far: [] });
    } else if (output.bytes !== undefined) {
      expect(Buffer.from(output.bytes).equals(Buffer.from(bytesOf(want.data))), output.name).toBe(
        true,
      );
    } else {
      expect(differences(want.datatype, output.data!, want.data), output.name).toEqual([]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/** One input of a request: JSON `data` (nested or flat), or `binary` bytes after the header. */
interface InputEntry {
  name: string;
  datatype: string;
  shape: readonly number[];
  data?: unknown;
  binary?: Uint8Array;
  /** The binary_data_size to declare when it is not `binary.length` (a lying header). */
  declaredSize?: number;
}

interface RequestOptions {
  id?: string;
  /** Outputs to ask for, by name; `binary` sets that output's binary_data flag. */
  outputs?: ReadonlyArray<{ name: string; binary?: boolean }>;
  /** parameters.binary_data_output: every output binary. */
  binaryOutput?: boolean;
}

interface SendOptions {
  /** Inference-Header-Content-Length to claim instead of the header's length. */
  headerLength?: (header: number, body: number) => number;
  /** Bytes appended after the inputs' binary data. */
  trailing?: Uint8Array;
  /** Send the header alone, as a JSON body, even when entries declare binary_data_size. */
  asJson?: boolean;
}

/** The infer request's header (JSON text) and its binary part. */
function encodeRequest(entries: readonly InputEntry[], options: RequestOptions = {}) {
  const binary: Uint8Array[] = [];
  const inputs = entries.map((entry) => {
    const { binary: bytes, declaredSize, ...rest } = entry;
    if (bytes === undefined && declaredSize === undefined) return rest;
    if (bytes !== undefined) binary.push(bytes);
    return { ...rest, parameters: { binary_data_size: declaredSize ?? bytes!.length } };
  });
  const header = jsonText({
    id: options.id,
    parameters: options.binaryOutput === true ? { binary_data_output: true } : undefined,
    inputs,
    outputs: options.outputs?.map((o) => ({
      name: o.name,
      parameters: o.binary === undefined ? undefined : { binary_data: o.binary },
    })),
  });
  return { header, binary: Buffer.concat(binary) };
}

async function post(
  url: string,
  request: { header: string; binary: Uint8Array },
  options: SendOptions = {},
): Promise<ServedAnswer> {
  const header = Buffer.from(request.header);
  const binary = Buffer.concat([request.binary, options.trailing ?? new Uint8Array(0)]);
  if (binary.length === 0 || options.asJson === true) {
    const res = await fetch(`${url}/v2/models/m/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: header,
    });
    return readAnswer(res);
  }
  const body = Buffer.concat([header, binary]);
  const length = options.headerLength?.(header.length, body.length) ?? header.length;
  const res = await fetch(`${url}/v2/models/m/infer`, {
    method: 'POST',
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(length),
    },
    body,
  });
  return readAnswer(res);
}

const infer = (
  url: string,
  entries: readonly InputEntry[],
  options: RequestOptions & SendOptions = {},
) => post(url, encodeRequest(entries, options), options);

/** A request's entry for a tensor: JSON data (nested by its shape, or flat) or binary. */
function entryOf(
  name: string,
  tensor: Tensor,
  form: 'nested' | 'flat' | 'binary',
  json?: readonly unknown[],
): InputEntry {
  const base = { name, datatype: tensor.datatype, shape: tensor.shape };
  if (form === 'binary') return { ...base, binary: bytesOf(tensor.data) };
  const values = json ?? Array.from(tensor.data as ArrayLike<unknown>, (v) => v);
  return { ...base, data: form === 'nested' ? nest(values, tensor.shape) : values };
}

// ---------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------

interface Served {
  url: string;
  pool: InferencePool;
  /** The same model in-process: the reference. */
  session: OnnxSession;
  /** Rows of each session run the pool made. */
  runs: number[];
  close(): Promise<void>;
}

/** cloud-infer serving `model` as `m` (task raw), with an in-process session beside it. */
async function serve(model: Uint8Array, options: { maxWaitMs?: number } = {}): Promise<Served> {
  const runs: number[] = [];
  const pool = await createInferencePool({
    model,
    threads: 1,
    maxBatch: 64,
    maxQueueRows: 4096,
    maxWaitMs: options.maxWaitMs ?? 0,
    onRun: (rows) => runs.push(rows),
  });
  const session = await openOnnxModel(model);
  const server = await listen(
    buildServer(
      cloudInferDefinition({
        model: { name: 'm', version: '1' },
        pool,
        task: createTaskAdapter({ kind: 'raw' }, pool.signature),
        maxBatch: 64,
        readiness: [],
      }),
      {
        telemetry: capturedTelemetry('cloud-infer'),
        bodyLimitBytes: 8 << 20,
        readinessTimeoutMs: 1000,
      },
    ),
  );
  return {
    url: server.url,
    pool,
    session,
    runs,
    async close() {
      await server.close();
      await pool.close();
      await session.close();
    },
  };
}

/** A server started before the describe block's tests and closed after them. */
function served(model: () => Uint8Array, options: { maxWaitMs?: number } = {}): () => Served {
  let server: Served | undefined;
  beforeAll(async () => {
    server = await serve(model(), options);
  });
  afterAll(async () => server?.close());
  return () => server!;
}

async function getJson(url: string): Promise<unknown> {
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return res.json();
}

/** Deterministic pseudo-random FP32 values (a 32-bit LCG), for inputs whose values do not matter. */
function floats(count: number, seed: number): Float32Array {
  let state = seed >>> 0;
  return Float32Array.from({ length: count }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state / 2 ** 32) * 20 - 10;
  });
}

// ---------------------------------------------------------------------------------------------
// 1. Every datatype × rank × encoding, through an identity model
// ---------------------------------------------------------------------------------------------

/** A datatype's test values: what JSON carries exactly, then what only the binary form can. */
interface Values {
  json: readonly JsonScalar[];
  /** In storage form (FP16 bits, BigInt). */
  binaryOnly: readonly Element[];
}

const maxFloat32 = 3.4028234663852886e38;
const values: Readonly<Record<OipDatatype, Values>> = {
  BOOL: { json: [true, false, false, true, true], binaryOnly: [] },
  UINT8: { json: [0, 255, 1, 128, 254], binaryOnly: [] },
  UINT16: { json: [0, 65535, 1, 32768], binaryOnly: [] },
  UINT32: { json: [0, 4294967295, 1, 2147483648], binaryOnly: [] },
  UINT64: {
    json: [0, Number.MAX_SAFE_INTEGER, 1, 4294967296],
    binaryOnly: [2n ** 64n - 1n, 2n ** 63n, 2n ** 53n + 1n],
  },
  INT8: { json: [-128, 127, 0, -1], binaryOnly: [] },
  INT16: { json: [-32768, 32767, 0, -1], binaryOnly: [] },
  INT32: { json: [-2147483648, 2147483647, 0, -1], binaryOnly: [] },
  INT64: {
    json: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, 0, -1],
    binaryOnly: [-(2n ** 63n), 2n ** 63n - 1n, 2n ** 53n + 1n],
  },
  FP16: {
    json: [
      65504, // largest
      -65504,
      2 ** -14, // smallest normal
      2 ** -24, // smallest subnormal
      -0,
      0.1, // rounds
      1 + 2 ** -11 + 2 ** -40, // rounds up; via float32 first it would tie and round down
      65519, // just below the overflow midpoint: 65504
      3 * 2 ** -25, // a tie between subnormals: to even (2 * 2^-24)
      -1e-9, // underflows to -0
      Math.PI,
    ],
    binaryOnly: [0x0001, 0x03ff, 0x0400, 0x7bff, 0x8000, 0xfbff, 0x8001, 0x3555],
  },
  FP32: {
    json: [
      maxFloat32,
      -maxFloat32,
      1.1754943508222875e-38, // smallest normal
      1.401298464324817e-45, // smallest subnormal
      -0,
      0.1,
      16777217, // rounds to 16777216
      1 / 3,
      1.5 * 2 ** -150, // rounds up to the smallest subnormal
      1e-46, // underflows to 0
    ],
    binaryOnly: [-1.401298464324817e-45, 1.1754942106924411e-38],
  },
  FP64: {
    json: [
      Number.MAX_VALUE, // twice, four apart: their sum overflows
      -0,
      Number.MIN_VALUE,
      0.1,
      Number.MAX_VALUE,
      -Number.MAX_VALUE,
      1 / 3,
      2.2250738585072014e-308,
    ],
    binaryOnly: [-Number.MIN_VALUE, 2 ** 53 + 2],
  },
  BYTES: {
    json: ['', 'héllo', '日本語', '🙂 emoji', 'tab\tquote"back\\slash', '\n', 'x'.repeat(1000)],
    binaryOnly: [],
  },
};

interface SignatureCase {
  datatype: OipDatatype;
  /** The model's dims: numbers fixed, strings symbolic. */
  dims: Array<number | string>;
  /** The request's shape. */
  shape: number[];
  label: string;
}

const batchedRanks: ReadonlyArray<Omit<SignatureCase, 'datatype'>> = [
  { dims: ['N'], shape: [12], label: 'rank 1 [N]' },
  { dims: ['N', 3], shape: [3, 3], label: 'rank 2 [N, 3]' },
  { dims: ['N', 2, 'H', 'W'], shape: [2, 2, 2, 3], label: 'rank 4 [N, 2, H, W]' },
];
const unbatched: readonly SignatureCase[] = [
  ...(['BOOL', 'UINT8', 'INT8', 'UINT64', 'INT64', 'FP16', 'FP32', 'BYTES'] as const).map(
    (datatype) => ({ datatype, dims: [], shape: [], label: 'rank 0 (scalar)' }),
  ),
  ...(['UINT16', 'FP16', 'FP64', 'BYTES'] as const).map((datatype) => ({
    datatype,
    dims: [2, 3],
    shape: [2, 3],
    label: 'fixed [2, 3]',
  })),
];
const signatureCases: readonly SignatureCase[] = [
  ...oipDatatypes.flatMap((datatype) => batchedRanks.map((rank) => ({ datatype, ...rank }))),
  ...unbatched,
];

interface Encoding {
  name: string;
  binaryIn: boolean;
  /** How binary outputs are asked for; undefined: JSON out. */
  binaryOut?: 'all' | 'per-output';
  /** JSON data nested by the shape, or flat. */
  nested: boolean;
}

const encodings: readonly Encoding[] = [
  { name: 'JSON in (nested), JSON out', binaryIn: false, nested: true },
  { name: 'binary in, binary out', binaryIn: true, binaryOut: 'per-output', nested: false },
  { name: 'JSON in (flat), binary out', binaryIn: false, binaryOut: 'all', nested: false },
  { name: 'binary in, JSON out', binaryIn: true, nested: false },
];

/** `count` picks from `length` choices, starting at `offset`, wrapping around. */
const cycle = (length: number, count: number, offset: number) =>
  Array.from({ length: count }, (_, i) => (offset + i) % length);

const openDim = (d: number | string) => (typeof d === 'number' ? d : -1);

describe.each(signatureCases)('identity $datatype, $label', (c) => {
  const server = served(() => identityModel({ datatype: c.datatype, shape: c.dims }));
  const count = c.shape.reduce((n, d) => n * d, 1);

  it('metadata names the input and output with their datatype and shape (-1: open)', async () => {
    const spec = { datatype: c.datatype, shape: c.dims.map(openDim) };
    expect(await getJson(`${server().url}/v2/models/m`)).toEqual({
      name: 'm',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'input', ...spec }],
      outputs: [{ name: 'output', ...spec }],
    });
  });

  if (c.dims.length === 0) {
    it('refuses shape [1] for the scalar (onnxruntime would run it)', async () => {
      const data = [values[c.datatype].json[0]];
      const answer = await infer(server().url, [
        { name: 'input', datatype: c.datatype, shape: [1], data },
      ]);
      expect(answer.status).toBe(400);
      expect(answer.header['error']).toBe(
        'body.inputs[0]: input input takes shape [] (-1: any size), got [1]',
      );
    });
  }

  it.each(encodings.map((e, i) => ({ ...e, i })))('$name', async (encoding) => {
    const { json, binaryOnly } = values[c.datatype];
    const choices: readonly Element[] = encoding.binaryIn
      ? [...json.map((v) => fromJson(c.datatype, v)), ...binaryOnly]
      : json.map((v) => fromJson(c.datatype, v));
    // A scalar takes one value: each encoding takes another one.
    const picks = cycle(choices.length, count, count === 1 ? encoding.i * 2 : 0);
    const tensor: Tensor = {
      datatype: c.datatype,
      shape: c.shape,
      data: storageOf(
        c.datatype,
        picks.map((k) => choices[k]!),
      ),
    };
    const expected = await server().session.run({ input: tensor });
    const entry = encoding.binaryIn
      ? entryOf('input', tensor, 'binary')
      : entryOf(
          'input',
          tensor,
          encoding.nested ? 'nested' : 'flat',
          picks.map((k) => json[k]!),
        );
    const answer = await infer(server().url, [entry], {
      id: `${c.datatype}-${encoding.i}`,
      binaryOutput: encoding.binaryOut === 'all',
      ...(encoding.binaryOut === 'per-output'
        ? { outputs: [{ name: 'output', binary: true }] }
        : {}),
    });
    expectOutputs(answer, expected, ['output']);
    expect(answer.header['id']).toBe(`${c.datatype}-${encoding.i}`);
    expect(answer.outputs[0]!.bytes !== undefined).toBe(encoding.binaryOut !== undefined);
    expect(answer.contentType).toMatch(
      encoding.binaryOut === undefined ? /^application\/json/ : /^application\/octet-stream/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Several inputs and outputs
// ---------------------------------------------------------------------------------------------

describe('multiIoModel: a FP32 [N, 3] and b INT64 [N] in; sum, b_twice, flag out', () => {
  const server = served(multiIoModel);
  const rows = 5;
  const a: Tensor = { datatype: 'FP32', shape: [rows, 3], data: floats(rows * 3, 7) };
  const b: Tensor = {
    datatype: 'INT64',
    shape: [rows],
    data: BigInt64Array.from([4n, -2n, 0n, 2n ** 53n - 1n, -(2n ** 53n) + 1n]),
  };
  const bJson = [4, -2, 0, 2 ** 53 - 1, -(2 ** 53) + 1];
  const all = ['sum', 'b_twice', 'flag'];
  let expected: Record<string, Tensor>;
  beforeAll(async () => {
    expected = await server().session.run({ a, b });
  });

  it('metadata lists both inputs and the three outputs in graph order', async () => {
    expect(await getJson(`${server().url}/v2/models/m`)).toMatchObject({
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [-1, 3] },
        { name: 'b', datatype: 'INT64', shape: [-1] },
      ],
      outputs: [
        { name: 'sum', datatype: 'FP32', shape: [-1, 3] },
        { name: 'b_twice', datatype: 'INT64', shape: [-1] },
        { name: 'flag', datatype: 'BOOL', shape: [-1] },
      ],
    });
  });

  it.each([
    {
      form: 'nested JSON',
      entries: () => [entryOf('a', a, 'nested'), entryOf('b', b, 'nested', bJson)],
    },
    { form: 'flat JSON', entries: () => [entryOf('a', a, 'flat'), entryOf('b', b, 'flat', bJson)] },
    {
      form: 'binary, a first (b unaligned)',
      entries: () => [entryOf('a', a, 'binary'), entryOf('b', b, 'binary')],
    },
    {
      form: 'binary, b first',
      entries: () => [entryOf('b', b, 'binary'), entryOf('a', a, 'binary')],
    },
    {
      form: 'a binary, b JSON',
      entries: () => [entryOf('b', b, 'flat', bJson), entryOf('a', a, 'binary')],
    },
  ])('$form in: every output, JSON and binary', async ({ entries }) => {
    expectOutputs(await infer(server().url, entries()), expected, all);
    expectOutputs(await infer(server().url, entries(), { binaryOutput: true }), expected, all);
  });

  it('answers only the outputs asked for, in the asked order, each in its own encoding', async () => {
    const answer = await infer(server().url, [entryOf('a', a, 'flat'), entryOf('b', b, 'binary')], {
      outputs: [{ name: 'flag' }, { name: 'sum', binary: true }],
    });
    expectOutputs(answer, expected, ['flag', 'sum']);
    expect(answer.outputs.map((o) => o.bytes !== undefined)).toEqual([false, true]);
    const one = await infer(
      server().url,
      [entryOf('a', a, 'flat'), entryOf('b', b, 'flat', bJson)],
      {
        outputs: [{ name: 'b_twice' }],
      },
    );
    expectOutputs(one, expected, ['b_twice']);
  });

  it('carries 64-bit values past 2^53 exactly in binary, and prints them exactly in JSON', async () => {
    const big: Tensor = {
      datatype: 'INT64',
      shape: [3],
      data: BigInt64Array.from([2n ** 62n + 1n, -(2n ** 62n) - 3n, 2n ** 53n + 1n]),
    };
    const small: Tensor = { datatype: 'FP32', shape: [3, 3], data: floats(9, 3) };
    const want = await server().session.run({ a: small, b: big });
    const entries = [entryOf('a', small, 'binary'), entryOf('b', big, 'binary')];
    expectOutputs(await infer(server().url, entries), want, all);
    expectOutputs(await infer(server().url, entries, { binaryOutput: true }), want, all);
  });

  it('a batch of one row', async () => {
    const one = {
      a: { ...a, shape: [1, 3], data: floats(3, 11) },
      b: { ...b, shape: [1], data: BigInt64Array.of(-7n) },
    };
    const want = await server().session.run(one);
    expectOutputs(
      await infer(server().url, [entryOf('a', one.a, 'nested'), entryOf('b', one.b, 'binary')]),
      want,
      all,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// 3. Every mismatch: a 400 naming the input, what it takes and what came
// ---------------------------------------------------------------------------------------------

describe('requests that do not fit the signature', () => {
  const pairs: IdentityPair[] = [
    { input: 'f32', output: 'f32_out', datatype: 'FP32', shape: ['N', 3] },
    { input: 'i32', output: 'i32_out', datatype: 'INT32', shape: ['N'] },
    { input: 'u8', output: 'u8_out', datatype: 'UINT8', shape: ['N'] },
    { input: 'i64', output: 'i64_out', datatype: 'INT64', shape: ['N'] },
    { input: 'flag', output: 'flag_out', datatype: 'BOOL', shape: ['N'] },
    { input: 'text', output: 'text_out', datatype: 'BYTES', shape: ['N'] },
    { input: 'h', output: 'h_out', datatype: 'FP16', shape: ['N'] },
    { input: 'd', output: 'd_out', datatype: 'FP64', shape: ['N'] },
  ];
  const server = served(() => identitiesModel('checks', pairs));
  const tensors: Record<string, { tensor: Tensor; json: unknown[] }> = {
    f32: {
      tensor: { datatype: 'FP32', shape: [2, 3], data: Float32Array.of(1, 2, 3, 4, 5, 6) },
      json: [1, 2, 3, 4, 5, 6],
    },
    i32: { tensor: { datatype: 'INT32', shape: [2], data: Int32Array.of(1, -1) }, json: [1, -1] },
    u8: { tensor: { datatype: 'UINT8', shape: [2], data: Uint8Array.of(0, 255) }, json: [0, 255] },
    i64: {
      tensor: { datatype: 'INT64', shape: [2], data: BigInt64Array.of(5n, -5n) },
      json: [5, -5],
    },
    flag: {
      tensor: { datatype: 'BOOL', shape: [2], data: Uint8Array.of(1, 0) },
      json: [true, false],
    },
    text: { tensor: { datatype: 'BYTES', shape: [2], data: ['a', 'b'] }, json: ['a', 'b'] },
    h: {
      tensor: { datatype: 'FP16', shape: [2], data: Uint16Array.of(0x3800, 0xc000) },
      json: [0.5, -2],
    },
    d: {
      tensor: { datatype: 'FP64', shape: [2], data: Float64Array.of(0.25, 1e300) },
      json: [0.25, 1e300],
    },
  };
  const names = Object.keys(tensors);
  const jsonEntries = (): InputEntry[] =>
    names.map((name) => entryOf(name, tensors[name]!.tensor, 'nested', tensors[name]!.json));
  const binaryEntries = (): InputEntry[] =>
    names.map((name) => entryOf(name, tensors[name]!.tensor, 'binary'));

  type Change = (entries: InputEntry[]) => InputEntry[];
  const patch =
    (name: string, fields: Partial<InputEntry>): Change =>
    (entries) =>
      entries.map((e) => (e.name === name ? { ...e, ...fields } : e));
  const drop =
    (name: string): Change =>
    (entries) =>
      entries.filter((e) => e.name !== name);
  const add =
    (entry: InputEntry): Change =>
    (entries) => [...entries, entry];
  const f32 = (data: unknown) => patch('f32', { data });
  const bytes = (...values: number[]) => Uint8Array.from(values);
  const le32 = (...values: number[]) => new Uint8Array(Float32Array.from(values).buffer);
  const le64 = (...values: number[]) => new Uint8Array(Float64Array.from(values).buffer);

  interface Mismatch {
    name: string;
    /** Start from the all-binary request instead of the all-JSON one. */
    binary?: boolean;
    change?: Change;
    options?: RequestOptions & SendOptions;
    /** Fragments the error message must contain, in order. */
    says: string[];
  }

  const mismatches: Mismatch[] = [
    {
      name: 'wrong datatype',
      change: patch('f32', { datatype: 'FP64' }),
      says: ['input f32 takes datatype FP32, got FP64'],
    },
    {
      name: 'a datatype OIP does not have',
      change: patch('f32', { datatype: 'FLOAT32' }),
      says: ['input f32', '"FLOAT32" is not an OIP datatype'],
    },
    {
      name: 'wrong rank',
      change: patch('f32', { shape: [6], data: [1, 2, 3, 4, 5, 6] }),
      says: ['input f32 takes shape [-1,3] (-1: any size), got [6]'],
    },
    {
      name: 'wrong fixed dimension',
      change: patch('f32', { shape: [2, 4], data: [1, 2, 3, 4, 5, 6, 7, 8] }),
      says: ['input f32 takes shape [-1,3]', 'got [2,4]'],
    },
    {
      name: 'missing input',
      change: drop('i32'),
      says: ['input i32 (INT32 [-1]) is missing'],
    },
    {
      name: 'unknown input name',
      change: add({ name: 'nope', datatype: 'FP32', shape: [2], data: [1, 2] }),
      says: ['nope is not an input of this model', `(inputs: ${names.join(', ')})`],
    },
    {
      name: 'the same input twice',
      change: add({ name: 'u8', datatype: 'UINT8', shape: [2], data: [1, 2] }),
      says: ['u8 given twice'],
    },
    {
      name: 'inputs disagreeing on the batch dimension',
      change: patch('i32', { shape: [3], data: [1, 2, 3] }),
      says: ['inputs f32 and i32 disagree on the batch dimension (2 and 3)'],
    },
    {
      name: 'an empty batch',
      change: (entries) =>
        entries.map((e) => ({ ...e, shape: [0, ...e.shape.slice(1)], data: [] })),
      says: ['input f32 has an empty batch'],
    },
    {
      name: 'too few values',
      change: f32([1, 2, 3, 4, 5]),
      says: ['input f32', 'expected 6 values for shape [2,3], got 5'],
    },
    {
      name: 'too many values',
      change: f32([1, 2, 3, 4, 5, 6, 7]),
      says: ['input f32', 'data[6]', 'more values than the 6 the shape holds'],
    },
    {
      name: 'no data',
      change: f32(undefined),
      says: ['input f32', 'data: required'],
    },
    {
      name: 'a string for FP32',
      change: f32([
        [1, 'x', 3],
        [4, 5, 6],
      ]),
      says: ['input f32', 'data[0][1]: expected a finite number, got "x"'],
    },
    {
      name: 'null for FP32',
      change: f32([1, 2, 3, 4, 5, null]),
      says: ['input f32', 'data[5]: expected a finite number, got null'],
    },
    {
      name: 'an FP32 value past its range',
      change: f32([1, 2, 3, 4, 5, 1e39]),
      says: ['input f32', 'data[5]', 'FP32', 'got 1e+39'],
    },
    {
      name: 'an FP16 value past its range',
      change: patch('h', { data: [70000, 1] }),
      says: ['input h', 'data[0]', 'FP16', 'got 70000'],
    },
    {
      name: 'an FP64 value JSON reads as infinity',
      change: patch('d', { data: [new Num('1e400'), 1] }),
      says: ['input d', 'data[0]: expected a finite number, got Infinity'],
    },
    {
      name: '1.5 for INT32',
      change: patch('i32', { data: [1, 1.5] }),
      says: ['input i32', 'data[1]: expected an integer in [-2147483648, 2147483647], got 1.5'],
    },
    {
      name: '300 for UINT8',
      change: patch('u8', { data: [300, 1] }),
      says: ['input u8', 'data[0]: expected an integer in [0, 255], got 300'],
    },
    {
      name: '-1 for UINT8',
      change: patch('u8', { data: [1, -1] }),
      says: ['input u8', 'data[1]: expected an integer in [0, 255], got -1'],
    },
    {
      name: '2^53 for INT64 in JSON',
      change: patch('i64', { data: [2 ** 53, 1] }),
      says: [
        'input i64',
        'data[0]: past the integers JSON carries exactly (|n| < 2^53): send binary data for such 64-bit values, got 9007199254740992',
      ],
    },
    {
      name: 'a number for BOOL',
      change: patch('flag', { data: [1, false] }),
      says: ['input flag', 'data[0]: expected true or false, got 1'],
    },
    {
      name: 'a number for BYTES',
      change: patch('text', { data: ['a', 7] }),
      says: ['input text', 'data[1]: expected a string, got 7'],
    },
    {
      name: 'a BYTES element with NUL (JSON)',
      change: patch('text', { data: ['a\u0000b', 'c'] }),
      says: ['input text', 'data[0]: a BYTES element holds a NUL byte'],
    },
    {
      name: 'an output the model does not have',
      options: { outputs: [{ name: 'nope' }] },
      says: ['body.outputs: nope is not an output of this model (f32_out, i32_out'],
    },
    {
      name: 'binary_data_size not matching the shape',
      binary: true,
      change: patch('f32', { binary: le32(1, 2, 3, 4, 5) }),
      says: ['input f32', 'binary_data_size 20 does not hold 6 FP32 elements (24 bytes)'],
    },
    {
      name: 'binary bytes left over',
      binary: true,
      options: { trailing: bytes(1, 2, 3, 4) },
      says: ['4 bytes after the JSON header are not claimed by any input'],
    },
    {
      name: 'binary_data_size past the end of the body',
      binary: true,
      change: patch('d', { binary: le64(1), declaredSize: 16 }),
      says: ['input d', 'binary_data_size: 16 bytes declared, 8 left in the body'],
    },
    {
      name: 'the header length beyond the body',
      binary: true,
      options: { headerLength: (_header, body) => body + 100 },
      says: ['Inference-Header-Content-Length', 'is not a length within the'],
    },
    {
      name: 'binary_data_size in a body without a header length',
      binary: true,
      options: { asJson: true },
      says: ['input f32', 'binary data needs the Inference-Header-Content-Length header'],
    },
    {
      name: 'both JSON data and binary data',
      binary: true,
      change: patch('f32', { data: [1, 2, 3, 4, 5, 6] }),
      says: ['input f32', 'data: must be absent when the data is sent as binary'],
    },
    {
      name: 'a BYTES element with NUL (binary)',
      binary: true,
      change: patch('text', { binary: bytesOf(['a', 'b\u0000c']) }),
      says: ['input text', 'element 1: a BYTES element holds a NUL byte'],
    },
    {
      name: 'a BYTES element that is not UTF-8',
      binary: true,
      change: patch('text', { binary: rawBytesElements([bytes(0xff, 0xfe), bytes(0x61)]) }),
      says: ['input text', 'binary BYTES element 0 is not UTF-8 text'],
    },
    {
      name: 'a BYTES length past the data',
      binary: true,
      change: patch('text', { binary: Buffer.concat([bytesOf(['a']), bytes(100, 0, 0, 0, 0x62)]) }),
      says: ['input text', 'binary BYTES element 1 claims 100 bytes past the data'],
    },
    {
      name: 'BOOL byte 2',
      binary: true,
      change: patch('flag', { binary: bytes(1, 2) }),
      says: ['input flag', 'element 1 is 2', '0 or 1'],
    },
    {
      name: 'NaN in binary FP32',
      binary: true,
      change: patch('f32', { binary: le32(1, 2, 3, 4, NaN, 6) }),
      says: ['input f32', 'element 4 is not a finite number (NaN)'],
    },
    {
      name: 'infinity in binary FP64',
      binary: true,
      change: patch('d', { binary: le64(1, -Infinity) }),
      says: ['input d', 'element 1 is not a finite number (-Infinity)'],
    },
    {
      name: 'infinity in binary FP16',
      binary: true,
      change: patch('h', { binary: new Uint8Array(Uint16Array.of(0x7c00, 0x3c00).buffer) }),
      says: ['input h', 'element 0', '0x7c00', 'finite'],
    },
  ];

  it.each(mismatches)('$name: 400 saying so, and serving on', async (mismatch) => {
    const base = mismatch.binary === true ? binaryEntries() : jsonEntries();
    const answer = await infer(
      server().url,
      (mismatch.change ?? ((e) => e))(base),
      mismatch.options,
    );
    expect(answer.status, jsonText(answer.header)).toBe(400);
    const message = answer.header['error'];
    expect(typeof message).toBe('string');
    let from = 0;
    for (const fragment of mismatch.says) {
      const at = (message as string).indexOf(fragment, from);
      expect(
        at,
        `${JSON.stringify(fragment)} in ${JSON.stringify(message)}`,
      ).toBeGreaterThanOrEqual(0);
      from = at + fragment.length;
    }
    const good = await infer(
      server().url,
      mismatch.binary === true ? binaryEntries() : jsonEntries(),
    );
    expect(good.status).toBe(200);
  });

  it('the same requests done right answer every output exactly', async () => {
    const inputs = Object.fromEntries(names.map((n) => [n, tensors[n]!.tensor]));
    const expected = await server().session.run(inputs);
    const outs = pairs.map((p) => p.output);
    expectOutputs(await infer(server().url, jsonEntries()), expected, outs);
    expectOutputs(
      await infer(server().url, binaryEntries(), { binaryOutput: true }),
      expected,
      outs,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// 4. Dynamic batching
// ---------------------------------------------------------------------------------------------

describe('dynamic batching', () => {
  /** Sends every request at once; each answer must equal its own in-process run. */
  async function concurrently(
    server: Served,
    requests: ReadonlyArray<Record<string, Tensor>>,
    tolerance?: number,
  ) {
    const expected = await Promise.all(requests.map((inputs) => server.session.run(inputs)));
    const answers = await Promise.all(
      requests.map((inputs) =>
        infer(
          server.url,
          Object.entries(inputs).map(([name, tensor]) => entryOf(name, tensor, 'binary')),
          { binaryOutput: true },
        ),
      ),
    );
    answers.forEach((answer, i) =>
      expectOutputs(
        answer,
        expected[i]!,
        server.session.signature.outputs.map((o) => o.name),
        tolerance,
      ),
    );
  }
  /**
   * onnxruntime's ReduceMean sums in an order that depends on the batch's layout: a row's mean
   * run with others can differ from its mean run alone in the last bits (9 or 10 values per
   * mean: 18 of 63 differ). Means of 16 or fewer values in [-10, 10] stay well within this.
   */
  const summationOrder = 1e-5;
  const image = (rows: number, h: number, w: number, seed: number) => ({
    image: {
      datatype: 'FP32' as const,
      shape: [rows, 3, h, w],
      data: floats(rows * 3 * h * w, seed),
    },
  });

  describe('imageModel [N, 3, H, W], waiting 200 ms to fill a batch', () => {
    const server = served(imageModel, { maxWaitMs: 200 });

    it('joins same-size requests and never mixes sizes', async () => {
      server().runs.length = 0;
      // Interleaved: four 1-row 4x4 images and three 2-row 2x5 ones.
      const requests = [
        image(1, 4, 4, 1),
        image(2, 2, 5, 2),
        image(1, 4, 4, 3),
        image(2, 2, 5, 4),
        image(1, 4, 4, 5),
        image(2, 2, 5, 6),
        image(1, 4, 4, 7),
      ];
      await concurrently(server(), requests, summationOrder);
      expect([...server().runs].sort((x, y) => x - y)).toEqual([4, 6]);
    });
  });

  describe('imageModel, no waiting', () => {
    const server = served(imageModel);

    it('answers many concurrent requests of three sizes, each its own', async () => {
      server().runs.length = 0;
      const sizes = [
        [1, 3, 3],
        [2, 8, 2],
        [3, 1, 1],
      ] as const;
      const requests = Array.from({ length: 24 }, (_, i) => {
        const [rows, h, w] = sizes[i % 3]!;
        return image(rows, h, w, 100 + i);
      });
      await concurrently(server(), requests, summationOrder);
      const rows = requests.reduce((n, r) => n + r.image.shape[0]!, 0);
      expect(server().runs.reduce((n, r) => n + r, 0)).toBe(rows);
    });
  });

  describe('fixedBatchModel [1, 4]: no batch dimension', () => {
    const server = served(fixedBatchModel, { maxWaitMs: 50 });

    it('runs concurrent requests one at a time, each answered right', async () => {
      server().runs.length = 0;
      const requests = Array.from({ length: 6 }, (_, i) => ({
        x: { datatype: 'FP32' as const, shape: [1, 4], data: floats(4, 200 + i) },
      }));
      await concurrently(server(), requests);
      expect(server().runs).toEqual([1, 1, 1, 1, 1, 1]);
      expect(server().pool.signature.batched).toBe(false);
    });
  });

  describe('mismatchedBatchModel: x [N, 2] → total [1, 2]', () => {
    const server = served(mismatchedBatchModel, { maxWaitMs: 50 });

    it('is not batched: each request runs alone and gets its own column sums', async () => {
      server().runs.length = 0;
      expect(server().pool.signature.batched).toBe(false);
      const requests = [1, 2, 3, 4, 2].map((rows, i) => ({
        x: { datatype: 'FP32' as const, shape: [rows, 2], data: floats(rows * 2, 300 + i) },
      }));
      await concurrently(server(), requests);
      expect(server().runs).toHaveLength(requests.length);
    });
  });

  describe('nonzeroIndicesModel: x [N, 2] → nonzero [K, 2], K not the batch', () => {
    const server = served(nonzeroIndicesModel, { maxWaitMs: 50 });
    const requests = [1, 2, 3, 1].map((rows, i) => ({
      x: { datatype: 'FP32' as const, shape: [rows, 2], data: floats(rows * 2, 400 + i) },
    }));

    it('never hands out a wrong split: each request gets its own indices', async () => {
      // The metadata cannot tell K from a batch dimension: the pool joins, then sees 14 index
      // rows for a batch of 7 and runs each request alone instead.
      expect(server().pool.signature.batched).toBe(true);
      await concurrently(server(), requests);
      expect(server().runs.length).toBeGreaterThan(requests.length);
      expect(server().runs.slice(-4).sort()).toEqual([1, 1, 2, 3]);
    });

    it('and from then on runs every request alone', async () => {
      server().runs.length = 0;
      await concurrently(server(), requests);
      expect([...server().runs].sort()).toEqual([1, 1, 2, 3]);
    });
  });
});

// ---------------------------------------------------------------------------------------------
// 5. The instances form
// ---------------------------------------------------------------------------------------------

describe('POST /predict {"instances": [...]}', () => {
  const predict = async (url: string, body: unknown) => {
    const res = await fetch(`${url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: jsonText(body),
    });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    return arrayOf(objectOf(parseExact(text))['predictions']).map(objectOf);
  };

  describe('a one-input model: identity FP32 [N, 2, 2]', () => {
    const server = served(() => identityModel({ datatype: 'FP32', shape: ['N', 2, 2] }));

    it('takes each sample itself and answers each output row, nested', async () => {
      const samples = [
        [
          [1, 0.1],
          [maxFloat32, 1e-45],
        ],
        [
          [-3, 16777217],
          [1 / 3, 2.5],
        ],
      ];
      const tensor: Tensor = {
        datatype: 'FP32',
        shape: [2, 2, 2],
        data: Float32Array.from(samples.flat(2)),
      };
      const expected = await server().session.run({ input: tensor });
      const predictions = await predict(server().url, { instances: samples });
      expect(predictions.map((p) => Object.keys(p))).toEqual([['output'], ['output']]);
      predictions.forEach((p, row) => {
        const got = p['output']!;
        expect(arrayOf(got).map((r) => arrayOf(r).length)).toEqual([2, 2]);
        const want = (expected['output']!.data as Float32Array).subarray(row * 4, row * 4 + 4);
        expect(differences('FP32', flatten(got), want)).toEqual([]);
      });
    });
  });

  describe('refusals', () => {
    const server = served(() => identityModel({ datatype: 'FP32', shape: ['N', 2] }));

    it('a value past FP32 range is a 400 naming the sample, not an infinity', async () => {
      const res = await fetch(`${server().url}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          instances: [
            [1, 2],
            [3, 1e39],
          ],
        }),
      });
      expect(res.status).toBe(400);
      expect(await res.text()).toContain(
        'body.instances[1][1]: expected a finite number within FP32 range (±3.4028235e38), got 1e+39',
      );
    });
  });

  describe('multiIoModel: objects by input name', () => {
    const server = served(multiIoModel);

    it('answers {sum, b_twice, flag} per sample, equal to the in-process run', async () => {
      const instances = [
        { a: [1, 2, 3], b: 4 },
        { a: [0.1, -0.5, 7], b: -2 },
        { a: [1e-3, 1e3, -1e3], b: 0 },
      ];
      const expected = await server().session.run({
        a: {
          datatype: 'FP32',
          shape: [3, 3],
          data: Float32Array.from(instances.flatMap((s) => s.a)),
        },
        b: {
          datatype: 'INT64',
          shape: [3],
          data: BigInt64Array.from(instances, (s) => BigInt(s.b)),
        },
      });
      const predictions = await predict(server().url, { instances });
      expect(predictions).toHaveLength(3);
      predictions.forEach((p, row) => {
        expect(Object.keys(p)).toEqual(['sum', 'b_twice', 'flag']);
        const sum = (expected['sum']!.data as Float32Array).subarray(row * 3, row * 3 + 3);
        expect(differences('FP32', arrayOf(p['sum']), sum)).toEqual([]);
        expect(
          differences('INT64', [p['b_twice']!], expected['b_twice']!.data.slice(row, row + 1)),
        ).toEqual([]);
        expect(
          differences('BOOL', [p['flag']!], expected['flag']!.data.slice(row, row + 1)),
        ).toEqual([]);
      });
    });
  });
});
