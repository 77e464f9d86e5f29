/**
 * What the two Python Open Inference Protocol clients recorded in test/fixtures/oip-clients/ do
 * with an answer, ported rule by rule from their source (tritonclient.http and KServe's
 * InferenceRESTClient; the rules, with upstream file:line, are the numbered facts of that
 * directory's README), so a test can ask "what would this client return for our server's
 * answer?" without Python. Also: the fixtures' format, a JSON parser that keeps 64-bit integers
 * exact (both clients' parsers do; `JSON.parse` rounds them), and a raw HTTP/1.1 exchange that
 * puts a recorded request on the wire byte for byte (header names, case and order included),
 * which `fetch` cannot do, and hands back the answer undecoded (no transparent decompression).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { brotliDecompressSync, gunzipSync, inflateRawSync, inflateSync } from 'node:zlib';
import { fromHalf, toHalf } from '../../shared/inference/tensor.js';

// ---------------------------------------------------------------------------------------------
// Fixtures

/** A request as the capture server received it (see the README's "Fixture format"). */
interface RecordedRequest {
  method: string;
  path: string;
  query: string;
  httpVersion: string;
  /** Every header name as sent: order and case, host and user-agent included. */
  headerNamesAsSent: string[];
  /** Lower-cased names; host and user-agent left out. */
  headers: Record<string, string>;
  bodyBase64: string;
  bodyLength: number;
}

interface Fixture {
  step: string;
  client: string;
  /** null: the client raised before sending anything. */
  request: RecordedRequest | null;
  expectedAnswer: { status: number; headers: Record<string, string>; bodyBase64: string } | null;
  clientResult: unknown;
  notes?: unknown;
}

type ClientName = 'tritonclient' | 'kserve';

const fixturesDir = new URL('../fixtures/oip-clients/', import.meta.url);

/** The recorded user-agent of each client (left out of `headers`, see the README). */
const userAgents: Readonly<Record<ClientName, string>> = {
  tritonclient: 'python/gevent-http-client-2.0.8',
  kserve: 'python-httpx/0.23.3',
};

/** One client's fixtures, by file name without `.json`, in file-name order. */
function loadFixtures(client: ClientName): Map<string, Fixture> {
  const dir = new URL(`${client}/`, fixturesDir);
  const names = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort();
  return new Map(
    names.map((f) => [
      f.slice(0, -'.json'.length),
      parseJsonExact(readFileSync(new URL(f, dir), 'utf8')) as unknown as Fixture,
    ]),
  );
}

/** The body as sent (bodyBase64 is authoritative). */
function recordedBody(request: RecordedRequest): Buffer {
  return Buffer.from(request.bodyBase64, 'base64');
}

/** The body the server has to read: decompressed per its Content-Encoding (gzip, zlib deflate). */
function plainBody(request: RecordedRequest): Buffer {
  const body = recordedBody(request);
  const encoding = request.headers['content-encoding'];
  if (encoding === 'gzip') return gunzipSync(body);
  if (encoding === 'deflate') return inflateSync(body);
  return body;
}

/**
 * The recorded request's bytes: request line, every header in the order and case the client
 * sent it (host pointed at `host`, user-agent as recorded), then the body. `target` replaces
 * the path and query (a proxy that strips a base path).
 */
function requestBytes(
  request: RecordedRequest,
  host: string,
  client: ClientName,
  target = request.path + (request.query === '' ? '' : `?${request.query}`),
): Buffer {
  const lines = [`${request.method} ${target} ${request.httpVersion}`];
  for (const name of request.headerNamesAsSent) {
    const lower = name.toLowerCase();
    const value =
      lower === 'host'
        ? host
        : lower === 'user-agent'
          ? userAgents[client]
          : request.headers[lower];
    if (value === undefined) throw new Error(`fixture: no value recorded for header ${name}`);
    lines.push(`${name}: ${value}`);
  }
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  return Buffer.concat([head, recordedBody(request)]);
}

// ---------------------------------------------------------------------------------------------
// The wire

/** An answer as it came off the socket: body de-chunked, never decompressed. */
interface WireAnswer {
  status: number;
  reason: string;
  /** Lower-cased names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  chunked: boolean;
  body: Buffer;
}

function parseAnswer(data: Buffer, closed: boolean): WireAnswer | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = data.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
  if (status === null) throw new Error(`not an HTTP/1.x status line: ${statusLine}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const rest = data.subarray(end + 4);
  const answer = (body: Buffer, chunked: boolean): WireAnswer => ({
    status: Number(status[1]),
    reason: status[2] ?? '',
    headers,
    chunked,
    body,
  });
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n', at);
      if (lineEnd < 0) return undefined;
      const size = parseInt(rest.subarray(at, lineEnd).toString('latin1').split(';')[0]!, 16);
      if (size === 0) {
        // No trailers from our server: the last chunk is followed by one empty line.
        return rest.length >= lineEnd + 4 ? answer(Buffer.concat(parts), true) : undefined;
      }
      if (rest.length < lineEnd + 2 + size + 2) return undefined;
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
  }
  const length = headers['content-length'];
  if (length !== undefined) {
    return rest.length >= Number(length)
      ? answer(rest.subarray(0, Number(length)), false)
      : undefined;
  }
  return closed ? answer(rest, false) : undefined;
}

/** Writes `bytes` to a fresh connection to `url` and reads one answer. */
function sendRaw(url: string, bytes: Buffer): Promise<WireAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let data = Buffer.alloc(0);
    let settled = false;
    const settle = (err: Error | undefined, answer?: WireAnswer) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve(answer!);
    };
    const attempt = (closed: boolean) => {
      try {
        const answer = parseAnswer(data, closed);
        if (answer !== undefined) settle(undefined, answer);
        else if (closed) settle(new Error('connection closed before a whole answer'));
      } catch (err) {
        settle(err as Error);
      }
    };
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      attempt(false);
    });
    socket.on('end', () => attempt(true));
    socket.on('error', (err) => settle(err));
    socket.write(bytes);
  });
}

// ---------------------------------------------------------------------------------------------
// JSON with exact 64-bit integers (rapidjson and orjson read them exactly)

type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };

/** Where and why a JSON text does not parse (each client words it its own way). */
class JsonSyntaxError extends SyntaxError {
  constructor(
    readonly what: string,
    readonly offset: number,
    readonly empty: boolean,
  ) {
    super(`JSON: ${what} at offset ${offset}`);
  }
}

/**
 * JSON.parse, except that an integer literal outside the safe range is a bigint (exact) instead
 * of a rounded number. Throws JsonSyntaxError (a SyntaxError, as JSON.parse).
 */
function parseJsonExact(text: string): Json {
  let i = 0;
  const fail = (what: string): never => {
    throw new JsonSyntaxError(what, i, text.trim() === '');
  };
  const space = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i += 1;
  };
  const numberToken = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
  const string = (): string => {
    // To the closing quote (escapes skipped); JSON.parse checks and decodes what is between.
    let end = i + 1;
    while (end < text.length && text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
    if (end >= text.length) fail('unterminated string');
    try {
      const value = JSON.parse(text.slice(i, end + 1)) as string;
      i = end + 1;
      return value;
    } catch {
      return fail('invalid string');
    }
  };
  const value = (): Json => {
    space();
    const c = text[i];
    if (c === '{') {
      i += 1;
      const out: { [key: string]: Json } = {};
      space();
      if (text[i] === '}') {
        i += 1;
        return out;
      }
      for (;;) {
        space();
        if (text[i] !== '"') fail('expected a key');
        const key = string();
        space();
        if (text[i] !== ':') fail("expected ':'");
        i += 1;
        out[key] = value();
        space();
        const next = text[i];
        i += 1;
        if (next === '}') return out;
        if (next !== ',') fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i += 1;
      const out: Json[] = [];
      space();
      if (text[i] === ']') {
        i += 1;
        return out;
      }
      for (;;) {
        out.push(value());
        space();
        const next = text[i];
        i += 1;
        if (next === ']') return out;
        if (next !== ',') fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    for (const [word, meaning] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return meaning;
      }
    }
    numberToken.lastIndex = i;
    const match = numberToken.exec(text) ?? fail('unexpected character');
    i = numberToken.lastIndex;
    if (match[1] === undefined && match[2] === undefined) {
      const n = Number(match[0]);
      return Number.isSafeInteger(n) ? n : BigInt(match[0]);
    }
    return Number(match[0]);
  };
  const out = value();
  space();
  if (i !== text.length) fail('trailing characters');
  return out;
}

// ---------------------------------------------------------------------------------------------
// Python's exceptions, as far as a caller sees them

/** An exception a client raises: its Python class and `str(e)`. */
class PyError extends Error {
  constructor(
    readonly pyClass: string,
    readonly str: string,
  ) {
    super(str);
  }
}

/**
 * Python's UnicodeDecodeError text for the first invalid UTF-8 in `bytes`, or undefined when
 * it is valid UTF-8.
 */
function utf8Problem(bytes: Uint8Array): string | undefined {
  const hex = (b: number) => `0x${b.toString(16).padStart(2, '0')}`;
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i]!;
    let need: number;
    let low = 0x80;
    let high = 0xbf;
    if (b < 0x80) need = 0;
    else if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) low = 0xa0;
      if (b === 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) low = 0x90;
      if (b === 0xf4) high = 0x8f;
    } else {
      return `'utf-8' codec can't decode byte ${hex(b)} in position ${i}: invalid start byte`;
    }
    for (let k = 1; k <= need; k += 1) {
      const c = bytes[i + k];
      if (c === undefined) {
        return `'utf-8' codec can't decode byte ${hex(b)} in position ${i}: unexpected end of data`;
      }
      const [lo, hi] = k === 1 ? [low, high] : [0x80, 0xbf];
      if (c < lo || c > hi) {
        return `'utf-8' codec can't decode byte ${hex(b)} in position ${i}: invalid continuation byte`;
      }
    }
    i += need + 1;
  }
  return undefined;
}

/** `rapidjson.loads` (tritonclient): exact integers, rapidjson's error wording. */
function rapidjsonLoads(bytes: Uint8Array): Json {
  const problem = utf8Problem(bytes);
  if (problem !== undefined) throw new PyError('builtins.UnicodeDecodeError', problem);
  try {
    return parseJsonExact(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    const why = err.empty ? 'The document is empty.' : 'Invalid value.';
    throw new PyError('rapidjson.JSONDecodeError', `Parse error at offset ${err.offset}: ${why}`);
  }
}

/** Python's `json.loads` (httpx `response.json()`): the error wording of the json module. */
function pythonJsonLoads(bytes: Uint8Array): Json {
  try {
    return parseJsonExact(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    const text = Buffer.from(bytes).toString('utf8').slice(0, err.offset);
    const line = text.split('\n').length;
    const column = err.offset - text.lastIndexOf('\n');
    throw new PyError(
      'json.decoder.JSONDecodeError',
      `Expecting value: line ${line} column ${column} (char ${err.offset})`,
    );
  }
}

/** `orjson.loads` (kserve): exact integers; its wording is only approximated. */
function orjsonLoads(bytes: Uint8Array): Json {
  const problem = utf8Problem(bytes);
  if (problem !== undefined) {
    throw new PyError('orjson.JSONDecodeError', `str is not valid UTF-8: ${problem}`);
  }
  try {
    return parseJsonExact(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    if (!(err instanceof JsonSyntaxError)) throw err;
    throw new PyError('orjson.JSONDecodeError', err.message);
  }
}

const isObject = (v: Json | undefined): v is { [key: string]: Json } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

// ---------------------------------------------------------------------------------------------
// numpy, as far as the clients use it

/** An element as Python holds it: BYTES binary data are `bytes` (Buffer), JSON data `str`. */
type Element = number | bigint | boolean | string | Buffer;

/** A numpy array: dtype name, shape, elements in C order. */
interface NdArray {
  dtype: string;
  shape: number[];
  values: Element[];
}

/** tritonclient's triton_to_np_dtype / kserve's to_np_dtype (the same table). */
const npDtypes: Readonly<Record<string, string>> = {
  BOOL: 'bool',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'object',
};

const itemSizes: Readonly<Record<string, number>> = {
  bool: 1,
  int8: 1,
  uint8: 1,
  int16: 2,
  uint16: 2,
  float16: 2,
  int32: 4,
  uint32: 4,
  float32: 4,
  int64: 8,
  uint64: 8,
  float64: 8,
};

function npDtype(datatype: string): string {
  const dtype = npDtypes[datatype];
  if (dtype === undefined) throw new PyError('builtins.TypeError', `no dtype for ${datatype}`);
  return dtype;
}

/** The elements of nested lists in C order. */
function flatten(data: Json): Json[] {
  const flat: Json[] = [];
  const walk = (v: Json) => (Array.isArray(v) ? v.forEach(walk) : flat.push(v));
  walk(data);
  return flat;
}

/** `np.array(data, dtype)`, flattened: nested lists are walked in C order. */
function npArray(data: Json, dtype: string): Element[] {
  return flatten(data).map((v) => {
    if (dtype === 'object') return v as Element;
    if (dtype === 'bool') {
      if (typeof v !== 'boolean')
        throw new PyError('builtins.TypeError', `${JSON.stringify(v)} as bool`);
      return v;
    }
    if (typeof v !== 'number' && typeof v !== 'bigint') {
      throw new PyError('builtins.ValueError', `${JSON.stringify(v)} as ${dtype}`);
    }
    if (dtype === 'int64' || dtype === 'uint64') return BigInt(v);
    const n = Number(v);
    if (dtype === 'float32') return Math.fround(n);
    if (dtype === 'float16') return fromHalf(toHalf(n));
    return n;
  });
}

/** `np.frombuffer(bytes, dtype)` (little-endian, as on x86 and ARM). */
function npFrombuffer(bytes: Buffer, dtype: string): Element[] {
  const size = itemSizes[dtype];
  if (size === undefined) throw new PyError('builtins.ValueError', `frombuffer of ${dtype}`);
  if (bytes.length % size !== 0) {
    throw new PyError('builtins.ValueError', 'buffer size must be a multiple of element size');
  }
  const out: Element[] = [];
  for (let at = 0; at < bytes.length; at += size) {
    switch (dtype) {
      case 'bool':
        out.push(bytes[at] !== 0);
        break;
      case 'int8':
        out.push(bytes.readInt8(at));
        break;
      case 'uint8':
        out.push(bytes.readUInt8(at));
        break;
      case 'int16':
        out.push(bytes.readInt16LE(at));
        break;
      case 'uint16':
        out.push(bytes.readUInt16LE(at));
        break;
      case 'float16':
        out.push(fromHalf(bytes.readUInt16LE(at)));
        break;
      case 'int32':
        out.push(bytes.readInt32LE(at));
        break;
      case 'uint32':
        out.push(bytes.readUInt32LE(at));
        break;
      case 'float32':
        out.push(bytes.readFloatLE(at));
        break;
      case 'int64':
        out.push(bytes.readBigInt64LE(at));
        break;
      case 'uint64':
        out.push(bytes.readBigUInt64LE(at));
        break;
      default:
        out.push(bytes.readDoubleLE(at));
    }
  }
  return out;
}

/** tritonclient.utils.deserialize_bytes_tensor: uint32 LE length, then the bytes, repeated. */
function deserializeBytesTensor(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at < bytes.length) {
    if (at + 4 > bytes.length) throw new PyError('struct.error', 'unpack_from requires 4 bytes');
    const length = bytes.readUInt32LE(at);
    at += 4;
    if (at + length > bytes.length) {
      throw new PyError('struct.error', `unpack_from requires a buffer of ${length} bytes`);
    }
    out.push(bytes.subarray(at, at + length));
    at += length;
  }
  return out;
}

/** `array.reshape(shape)`: ValueError unless the element count matches. */
function reshape(values: Element[], dtype: string, shape: Json | undefined): NdArray {
  if (!Array.isArray(shape) || !shape.every((d) => typeof d === 'number')) {
    throw new PyError('builtins.TypeError', `shape ${JSON.stringify(shape)}`);
  }
  const dims = shape;
  const count = dims.reduce((n, d) => n * d, 1);
  if (count !== values.length) {
    const shown = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(',')})`;
    throw new PyError(
      'builtins.ValueError',
      `cannot reshape array of size ${values.length} into shape ${shown}`,
    );
  }
  return { dtype, shape: dims, values };
}

// ---------------------------------------------------------------------------------------------
// tritonclient.http

/** tritonclient.utils.InferenceServerException. */
class InferenceServerException extends Error {
  constructor(
    readonly msg: Json,
    readonly status: string | undefined,
  ) {
    super(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  /**
   * Python's `str(e)`: `"[status] " + msg`. Raises TypeError when `msg` is not a string (an
   * `{"error": {...}}` body), as Python's str concatenation does (README fact 11).
   */
  str(): string {
    if (typeof this.msg !== 'string') {
      const kind = this.msg === null ? 'NoneType' : Array.isArray(this.msg) ? 'list' : 'dict';
      throw new PyError('builtins.TypeError', `can only concatenate str (not "${kind}") to str`);
    }
    return this.status === undefined ? this.msg : `[${this.status}] ${this.msg}`;
  }
}

/** http/_utils.py `_get_error`: any status but exactly 200 is an error (facts 10, 11). */
function tritonError(answer: WireAnswer): InferenceServerException | undefined {
  if (answer.status === 200) return undefined;
  const status = String(answer.status);
  let body: string | null = null;
  try {
    const problem = utf8Problem(answer.body);
    if (problem !== undefined) throw new PyError('builtins.UnicodeDecodeError', problem);
    body = answer.body.toString('utf8');
    const parsed: Json =
      body.length > 0
        ? rapidjsonLoads(answer.body)
        : { error: 'client received an empty response from the server.' };
    // error_response["error"]: a KeyError prints as the quoted key.
    if (!isObject(parsed) || !('error' in parsed))
      throw new PyError('builtins.KeyError', "'error'");
    return new InferenceServerException(parsed['error'], status);
  } catch (err) {
    if (!(err instanceof PyError)) throw err;
    return new InferenceServerException(
      `an exception occurred in the client while decoding the response: ${err.str}\nresponse: ${body ?? 'None'}`,
      status,
    );
  }
}

/** is_server_live / is_server_ready / is_model_ready: `status_code == 200`, body unread (fact 2). */
function tritonHealth(answer: WireAnswer): boolean {
  return answer.status === 200;
}

/** get_server_metadata / get_model_metadata / get_model_config: raise, else the parsed JSON. */
function tritonJson(answer: WireAnswer): Json {
  const error = tritonError(answer);
  if (error !== undefined) throw error;
  return rapidjsonLoads(answer.body);
}

/** http/_infer_result.py InferResult (facts 12-16). */
class TritonInferResult {
  readonly #result: Json;
  readonly #buffer: Buffer;
  readonly #offsets = new Map<string, number>();

  constructor(answer: WireAnswer) {
    const header = answer.headers['inference-header-content-length'];
    let body = answer.body;
    const encoding = answer.headers['content-encoding'];
    if (encoding === 'gzip') body = gunzipSync(body);
    else if (encoding === 'deflate') body = inflateSync(body);
    if (header === undefined) {
      try {
        this.#result = rapidjsonLoads(body);
      } catch (err) {
        if (!(err instanceof PyError) || err.pyClass !== 'builtins.UnicodeDecodeError') throw err;
        throw new InferenceServerException(
          `Failed to encode using UTF-8. Please use binary_data=True, if you want to pass a byte array. UnicodeError: ${err.str}`,
          undefined,
        );
      }
      this.#buffer = Buffer.alloc(0);
      return;
    }
    if (!/^\s*[+-]?\d+\s*$/.test(header)) {
      throw new PyError(
        'builtins.ValueError',
        `invalid literal for int() with base 10: '${header}'`,
      );
    }
    const length = Number.parseInt(header, 10);
    this.#result = rapidjsonLoads(body.subarray(0, length));
    this.#buffer = body.subarray(length);
    let at = 0;
    const outputs = isObject(this.#result) ? this.#result['outputs'] : undefined;
    if (!Array.isArray(outputs)) throw new PyError('builtins.KeyError', "'outputs'");
    for (const output of outputs) {
      const parameters = isObject(output) ? output['parameters'] : undefined;
      const size = isObject(parameters) ? parameters['binary_data_size'] : undefined;
      if (size !== undefined && size !== null && isObject(output)) {
        this.#offsets.set(output['name'] as string, at);
        at += Number(size);
      }
    }
  }

  /** get_response(): the JSON header, unvalidated (fact 17). */
  getResponse(): Json {
    return this.#result;
  }

  /** as_numpy(name): null when no output has that name. */
  asNumpy(name: string): NdArray | null {
    const outputs = isObject(this.#result) ? this.#result['outputs'] : undefined;
    if (!Array.isArray(outputs)) return null;
    for (const output of outputs) {
      if (!isObject(output) || output['name'] !== name) continue;
      const datatype = output['datatype'] as string;
      const parameters = output['parameters'];
      const size = isObject(parameters) ? parameters['binary_data_size'] : undefined;
      if (size !== undefined && size !== null) {
        if (size === 0) return reshape([], 'float64', output['shape']);
        const start = this.#offsets.get(name)!;
        const slice = this.#buffer.subarray(start, start + Number(size));
        if (datatype === 'BYTES') {
          return reshape(deserializeBytesTensor(slice), 'object', output['shape']);
        }
        const dtype = npDtype(datatype);
        return reshape(npFrombuffer(slice, dtype), dtype, output['shape']);
      }
      const dtype = npDtype(datatype);
      return reshape(npArray(output['data'] ?? null, dtype), dtype, output['shape']);
    }
    return null;
  }
}

/** infer(): raise on any status but 200, else an InferResult. */
function tritonInfer(answer: WireAnswer): TritonInferResult {
  const error = tritonError(answer);
  if (error !== undefined) throw error;
  return new TritonInferResult(answer);
}

// ---------------------------------------------------------------------------------------------
// KServe InferenceRESTClient (protocol v2)

/** httpx.HTTPStatusError, with the message kserve builds (fact 11). */
class HTTPStatusError extends PyError {
  constructor(str: string) {
    super('httpx.HTTPStatusError', str);
  }
}

/** httpx decodes gzip, deflate (zlib, else raw) and br itself (fact 15). */
function httpxContent(answer: WireAnswer): Buffer {
  const encodings = (answer.headers['content-encoding'] ?? '')
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== '' && e !== 'identity')
    .reverse();
  let body = answer.body;
  for (const encoding of encodings) {
    if (encoding === 'gzip') body = gunzipSync(body);
    else if (encoding === 'deflate') {
      try {
        body = inflateSync(body);
      } catch {
        body = inflateRawSync(body);
      }
    } else if (encoding === 'br') body = brotliDecompressSync(body);
  }
  return body;
}

/** `response.is_success`: any 2xx. */
const isSuccess = (answer: WireAnswer) => answer.status >= 200 && answer.status < 300;

/** A Python value as `str.format` prints it: str as is, dicts and lists as their repr. */
function pythonText(value: Json): string {
  const repr = (v: Json): string => {
    if (v === null) return 'None';
    if (v === true) return 'True';
    if (v === false) return 'False';
    if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
    if (typeof v === 'number' || typeof v === 'bigint') return String(v);
    if (Array.isArray(v)) return `[${v.map(repr).join(', ')}]`;
    return `{${Object.entries(v)
      .map(([k, x]) => `${repr(k)}: ${repr(x)}`)
      .join(', ')}}`;
  };
  return typeof value === 'string' ? value : repr(value);
}

/**
 * inference_client.py `_construct_http_status_error`: the body is read only when Content-Type
 * is exactly `application/json`; then `body["error"]` if present, else the whole body.
 */
function kserveStatusError(answer: WireAnswer, url: string): HTTPStatusError {
  let message: Json = '';
  if (answer.headers['content-type'] === 'application/json') {
    message = pythonJsonLoads(httpxContent(answer));
    if (isObject(message) && 'error' in message) message = message['error']!;
  }
  return new HTTPStatusError(
    `${pythonText(message)}, '${answer.status} ${answer.reason}' for url '${url}'`,
  );
}

/** is_server_live / is_server_ready: raise on non-2xx, else `response.json()[key]` (fact 3). */
function kserveServerHealth(answer: WireAnswer, key: 'live' | 'ready', url: string): Json {
  if (!isSuccess(answer)) throw kserveStatusError(answer, url);
  const body = pythonJsonLoads(httpxContent(answer));
  if (!isObject(body)) {
    throw new PyError('builtins.AttributeError', `'${typeof body}' object has no attribute 'get'`);
  }
  return body[key] ?? null;
}

/** is_model_ready (v2): `response.is_success`, body ignored (fact 4). */
function kserveModelReady(answer: WireAnswer): boolean {
  return isSuccess(answer);
}

interface KserveOutput {
  name: string;
  shape: Json;
  datatype: string;
  parameters: Json;
  /** JSON `data` as sent (nested or flat); binary outputs as a flat list. */
  data: Json | Element[];
}

interface KserveResponse {
  model_name: string;
  id: Json;
  parameters: Json;
  outputs: KserveOutput[];
}

/**
 * infer(): raise on non-2xx (fact 10), else InferResponse.from_bytes with the JSON length from
 * Inference-Header-Content-Length or the whole body (facts 12-14). Binary outputs become lists
 * (`set_data_from_numpy(..., binary_data=False)`: numbers as Python numbers, BYTES as UTF-8 str)
 * and lose `binary_data_size` from their parameters; JSON `data` is kept as sent.
 */
function kserveInfer(answer: WireAnswer, url: string): KserveResponse {
  if (!isSuccess(answer)) throw kserveStatusError(answer, url);
  const content = httpxContent(answer);
  const header = answer.headers['inference-header-content-length'];
  const jsonLength = header === undefined ? content.length : Number.parseInt(header, 10);
  let parsed: Json;
  try {
    parsed = orjsonLoads(content.subarray(0, jsonLength));
  } catch (err) {
    if (!(err instanceof PyError)) throw err;
    throw new PyError('kserve.errors.InvalidInput', `Unrecognized request format: ${err.str}`);
  }
  if (!isObject(parsed)) throw new PyError('builtins.TypeError', 'the answer is not an object');
  if (!('model_name' in parsed)) throw new PyError('builtins.KeyError', "'model_name'");
  const modelName = parsed['model_name'] as string;
  const outputs = parsed['outputs'];
  if (!Array.isArray(outputs)) throw new PyError('builtins.KeyError', "'outputs'");
  let at = jsonLength;
  const out = outputs.map((output): KserveOutput => {
    if (!isObject(output)) throw new PyError('builtins.TypeError', 'an output is not an object');
    for (const key of ['name', 'shape', 'datatype']) {
      if (!(key in output)) throw new PyError('builtins.KeyError', `'${key}'`);
    }
    const name = output['name'] as string;
    const datatype = output['datatype'] as string;
    const shape = output['shape']!;
    const parameters = output['parameters'] ?? null;
    if (isObject(parameters) && 'binary_data_size' in parameters) {
      const size = Number(parameters['binary_data_size']);
      const raw = content.subarray(at, at + size);
      at += size;
      const dtype = npDtype(datatype);
      const array =
        datatype === 'BYTES'
          ? reshape(deserializeBytesTensor(raw), dtype, shape)
          : reshape(npFrombuffer(raw, dtype), dtype, shape);
      const data = array.values.map((v) => {
        if (!Buffer.isBuffer(v)) return v;
        if (utf8Problem(v) !== undefined) {
          throw new PyError(
            'kserve.errors.InferenceError',
            `Failed to encode "${String(v)}" using UTF-8. Please use binary_data=True, if you want to pass a byte array.`,
          );
        }
        return v.toString('utf8');
      });
      const { binary_data_size: _dropped, ...kept } = parameters;
      return { name, shape, datatype, parameters: kept, data };
    }
    const data = output['data'];
    if (data === undefined || data === null) {
      throw new PyError(
        'kserve.errors.InvalidInput',
        `'data' field is missing for output '${name}' for model '${modelName}'`,
      );
    }
    return { name, shape, datatype, parameters, data };
  });
  return {
    model_name: modelName,
    id: parsed['id'] ?? null,
    parameters: parsed['parameters'] ?? null,
    outputs: out,
  };
}

export {
  HTTPStatusError,
  InferenceServerException,
  PyError,
  TritonInferResult,
  deserializeBytesTensor,
  flatten,
  isObject,
  kserveInfer,
  kserveModelReady,
  kserveServerHealth,
  loadFixtures,
  npArray,
  npDtype,
  npFrombuffer,
  parseJsonExact,
  plainBody,
  recordedBody,
  requestBytes,
  sendRaw,
  tritonError,
  tritonHealth,
  tritonInfer,
  tritonJson,
};
export type {
  ClientName,
  Element,
  Fixture,
  Json,
  KserveOutput,
  KserveResponse,
  NdArray,
  RecordedRequest,
  WireAnswer,
};
