/**
 * Replays, against real cloud-infer servers with real (identity) ONNX models, every request the
 * real tritonclient.http and KServe InferenceRESTClient put on the wire
 * (test/fixtures/oip-clients/, recorded byte for byte), then reads our answer the way that
 * client does (test/support/oip-clients.ts ports each client's rules from its source) and checks
 * what the client would hand its caller: the inputs back unchanged for infer, what it reads for
 * health and metadata, a printable message naming the problem for errors. Fixtures that recorded
 * how a client treats a malformed answer still have a request: replayed, our answer must parse
 * cleanly (our server never gives those answers). Each test is named after its fixture's step.
 *
 * The 12 basic steps a tritonclient user takes, and the fixtures that cover each:
 *
 * | #  | step                       | tritonclient.http call                       | fixtures                    |
 * |----|----------------------------|----------------------------------------------|-----------------------------|
 * | 1  | live                       | is_server_live()                             | 01, 01b                     |
 * | 2  | ready                      | is_server_ready()                            | 02                          |
 * | 3  | server metadata            | get_server_metadata()                        | 03                          |
 * | 4  | model ready                | is_model_ready('mnist')                      | 04, 04c                     |
 * | 5  | model metadata             | get_model_metadata(), get_model_config()     | 05, 05c                     |
 * | 6  | infer JSON in / JSON out   | infer(binary_data=False in and out)          | 06, 06b, 08a                |
 * | 7  | infer binary in / out      | infer(binary_data=True in and out)           | 07, 08b, 12b                |
 * | 8  | infer without Content-Type | any infer: the client never sends one        | 06c, 07b, 09                |
 * | 9  | binary extension framing   | IHCL header, binary_data_size slices, BYTES  | 07b, 08c, 09, 09b, 13b      |
 * | 10 | error as string            | str(e) == "[status] <error>"                 | 10a, 10e, 12d               |
 * | 11 | versioned URL              | model_version='1'                            | 04b, 05b, 12a               |
 * | 12 | compression                | request_/response_compression_algorithm      | 11a, 11b, 11c, 11d          |
 *
 * The fixtures address two model names with several signatures (kserve 06a leaves FP16 out, 06d
 * sends only FP16, 06e adds an empty BYTES input to mnist, tritonclient 12e names its input
 * `output_cls`), so each signature gets its own server and a request goes to the server whose
 * model has its name and exactly its input names (unknown names: the first server).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../../shared/http/index.js';
import {
  cloudInferDefinition,
  createInferencePool,
  createTaskAdapter,
} from '../../../shared/inference/index.js';
import type { InferencePool } from '../../../shared/inference/index.js';
import { serverMetadata } from '../../../shared/inference/definition.js';
import { fromHalf, toHalf } from '../../../shared/inference/tensor.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { identitiesModel, identityModel } from '../../support/onnx-models.js';
import {
  HTTPStatusError,
  InferenceServerException,
  PyError,
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
  tritonHealth,
  tritonInfer,
  tritonJson,
} from '../../support/oip-clients.js';
import type {
  ClientName,
  Element,
  Fixture,
  Json,
  KserveResponse,
  NdArray,
  RecordedRequest,
  TritonInferResult,
  WireAnswer,
} from '../../support/oip-clients.js';

const poolOptions = { threads: 1, maxBatch: 256, maxQueueRows: 4096, maxWaitMs: 0 };
const version = '1';

/** The mixed-datatype identities of tritonclient 08a-08c and kserve 06b, as recorded. */
const mixedPairs = [
  { input: 'in_int64', output: 'out_int64', datatype: 'INT64', shape: [3] },
  { input: 'in_bool', output: 'out_bool', datatype: 'BOOL', shape: [3] },
  { input: 'in_bytes', output: 'out_bytes', datatype: 'BYTES', shape: [3] },
  { input: 'in_fp16', output: 'out_fp16', datatype: 'FP16', shape: [3] },
  { input: 'in_uint8', output: 'out_uint8', datatype: 'UINT8', shape: [1, 3] },
] as const;
const pairs = (names: readonly string[]) =>
  mixedPairs
    .filter((p) => names.includes(p.input))
    .map((p) => ({ ...p, shape: [...p.shape] as Array<number | string> }));

/** Every model the fixtures address: model name, and the ONNX graph answering them. */
const models = [
  { key: 'mnist', name: 'mnist', bytes: identityModel({ datatype: 'FP32', shape: ['N', 4] }) },
  {
    // tritonclient 12e: the classification request names its input output_cls.
    key: 'mnist-cls',
    name: 'mnist',
    bytes: identityModel({ datatype: 'FP32', shape: ['N', 4], inputName: 'output_cls' }),
  },
  {
    // kserve 06e: an empty BYTES [0] input next to the FP32 one.
    key: 'mnist-bytes',
    name: 'mnist',
    bytes: identitiesModel('mnist_bytes', [
      { input: 'in_bytes', output: 'out_bytes', datatype: 'BYTES', shape: ['M'] },
      { input: 'input', output: 'output', datatype: 'FP32', shape: [1, 4] },
    ]),
  },
  {
    key: 'mixed',
    name: 'mixed',
    bytes: identitiesModel('mixed', pairs(mixedPairs.map((p) => p.input))),
  },
  {
    // kserve 06a: kserve cannot send FP16 as JSON, so that request leaves it out.
    key: 'mixed-no-fp16',
    name: 'mixed',
    bytes: identitiesModel('mixed_no_fp16', pairs(['in_int64', 'in_bool', 'in_bytes', 'in_uint8'])),
  },
  {
    // kserve 06d: FP16 alone.
    key: 'mixed-fp16',
    name: 'mixed',
    bytes: identitiesModel('mixed_fp16', pairs(['in_fp16'])),
  },
];

interface Running {
  key: string;
  name: string;
  inputs: ReadonlySet<string>;
  pool: InferencePool;
  server: Listening;
}

const running: Running[] = [];

beforeAll(async () => {
  for (const model of models) {
    const pool = await createInferencePool({ model: model.bytes, ...poolOptions });
    const definition = cloudInferDefinition({
      model: { name: model.name, version },
      pool,
      task: createTaskAdapter({ kind: 'raw' }, pool.signature),
      maxBatch: poolOptions.maxBatch,
      readiness: [],
    });
    const server = await listen(
      buildServer(definition, {
        telemetry: capturedTelemetry('cloud-infer'),
        bodyLimitBytes: 8 << 20,
        readinessTimeoutMs: 1000,
      }),
    );
    running.push({
      key: model.key,
      name: model.name,
      inputs: new Set(pool.signature.inputs.map((s) => s.name)),
      pool,
      server,
    });
  }
});

afterAll(async () => {
  for (const r of running) {
    await r.server.close();
    await r.pool.close();
  }
});

// ---------------------------------------------------------------------------------------------
// What the recorded request carries

interface SentTensor {
  name: string;
  datatype: string;
  shape: number[];
  /** Elements as the client's numpy array held them (BYTES from binary data: Buffers). */
  values: Element[];
}

/** The request's JSON header (after decompression; the first IHCL bytes when binary). */
function requestHeader(request: RecordedRequest): { [key: string]: Json } {
  const body = plainBody(request);
  const ihcl = request.headers['inference-header-content-length'];
  const head = ihcl === undefined ? body : body.subarray(0, Number(ihcl));
  const json = parseJsonExact(head.toString('utf8'));
  if (!isObject(json)) throw new Error('fixture: the request body is not a JSON object');
  return json;
}

/** The inputs a request sends, decoded from its bytes as the server must read them. */
function sentInputs(request: RecordedRequest): SentTensor[] {
  const body = plainBody(request);
  const ihcl = request.headers['inference-header-content-length'];
  let at = ihcl === undefined ? body.length : Number(ihcl);
  const inputs = requestHeader(request)['inputs'] as Array<{ [key: string]: Json }>;
  return inputs.map((input) => {
    const datatype = input['datatype'] as string;
    const dtype = npDtype(datatype);
    const parameters = input['parameters'];
    const size = isObject(parameters) ? parameters['binary_data_size'] : undefined;
    let values: Element[];
    if (size !== undefined) {
      const slice = body.subarray(at, at + Number(size));
      at += Number(size);
      values = datatype === 'BYTES' ? deserializeBytesTensor(slice) : npFrombuffer(slice, dtype);
    } else {
      values = npArray(input['data']!, dtype);
    }
    return { name: input['name'] as string, datatype, shape: input['shape'] as number[], values };
  });
}

/** The output an identity model answers an input with. */
const outputOf = (input: string) =>
  input === 'input' || input === 'output_cls' ? 'output' : input.replace(/^in_/, 'out_');

/** An element at its datatype's precision, BYTES as text: what "unchanged" compares. */
function atPrecision(datatype: string, value: Element): Element {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (datatype === 'FP32') return Math.fround(Number(value));
  if (datatype === 'FP16') return fromHalf(toHalf(Number(value)));
  if (datatype === 'INT64' || datatype === 'UINT64') return BigInt(value);
  return value;
}
const precise = (datatype: string, values: readonly Element[]) =>
  values.map((v) => atPrecision(datatype, v));

/** The model's name in an OIP path (`/v2/models/{name}/...`), undecoded when not one. */
function modelInPath(path: string): string | undefined {
  const match = /\/v2\/models\/([^/]+)/.exec(path);
  return match === null ? undefined : decodeURIComponent(match[1]!);
}

/** The server a request goes to: the model's name, then its exact input names. */
function serverFor(request: RecordedRequest): Running {
  const name = modelInPath(request.path);
  const named = running.filter((r) => r.name === name);
  if (named.length === 0) return running[0]!;
  if (request.method !== 'POST' || named.length === 1) return named[0]!;
  const inputs = new Set(sentInputs(request).map((t) => t.name));
  const exact = named.find(
    (r) => r.inputs.size === inputs.size && [...inputs].every((n) => r.inputs.has(n)),
  );
  return exact ?? named[0]!;
}

/** Sends the recorded request, byte for byte, to its server; the answer and the URL used. */
async function replay(
  client: ClientName,
  request: RecordedRequest,
  target?: string,
): Promise<{ answer: WireAnswer; url: string; server: Running }> {
  const server = serverFor(request);
  const host = new URL(server.server.url).host;
  const bytes = requestBytes(request, host, client, target);
  const answer = await sendRaw(server.server.url, bytes);
  const path = target ?? request.path + (request.query === '' ? '' : `?${request.query}`);
  return { answer, url: `${server.server.url}${path}`, server };
}

const hasHeader = (request: RecordedRequest, name: string) => name in request.headers;

/** Facts every recorded request shows, per client (README facts 3, 7, 9 and kserve 5, 6). */
function checkRecordedRequest(client: ClientName, request: RecordedRequest): void {
  const body = recordedBody(request);
  expect(body.length).toBe(request.bodyLength);
  expect(request.httpVersion).toBe('HTTP/1.1');
  if (request.method === 'GET') {
    expect(body.length).toBe(0);
    expect(hasHeader(request, 'content-length')).toBe(false);
    expect(hasHeader(request, 'content-type')).toBe(false);
  } else {
    expect(request.headers['content-length']).toBe(String(body.length));
    expect(hasHeader(request, 'transfer-encoding')).toBe(false);
    const binary = sentInputsHaveBinary(request);
    // Binary framing is announced by the header alone, which counts the uncompressed JSON.
    expect(hasHeader(request, 'inference-header-content-length')).toBe(binary);
    if (binary) {
      const ihcl = Number(request.headers['inference-header-content-length']);
      const json = plainBody(request).subarray(0, ihcl).toString('utf8');
      expect(() => parseJsonExact(json)).not.toThrow();
    }
    if (client === 'kserve') {
      expect(request.headers['content-type']).toBe(
        binary ? 'application/octet-stream' : 'application/json',
      );
    }
  }
  if (client === 'tritonclient') {
    // tritonclient never sends a Content-Type: the server must not need one.
    expect(hasHeader(request, 'content-type')).toBe(false);
    expect(request.headerNamesAsSent.every((n) => n === n.toLowerCase())).toBe(true);
  } else {
    expect(request.headers['accept']).toBe('*/*');
    expect(request.headers['accept-encoding']).toBe('gzip, deflate, br');
    expect(request.headers['connection']).toBe('keep-alive');
  }
}

function sentInputsHaveBinary(request: RecordedRequest): boolean {
  const inputs = requestHeader(request)['inputs'] as Array<{ [key: string]: Json }>;
  return inputs.some((i) => isObject(i['parameters']) && 'binary_data_size' in i['parameters']);
}

// ---------------------------------------------------------------------------------------------
// tritonclient expectations

/** Runs `fn`; the InferenceServerException it raised, or a failure if it returned. */
function tritonRaises(fn: () => unknown): InferenceServerException {
  try {
    fn();
  } catch (err) {
    if (err instanceof InferenceServerException) return err;
    throw err;
  }
  throw new Error('expected tritonclient to raise InferenceServerException');
}

/** The infer result, after checking the answer is one tritonclient takes (status exactly 200). */
function tritonOk(answer: WireAnswer): TritonInferResult {
  expect(answer.status, answer.body.toString('utf8')).toBe(200);
  const ihcl = answer.headers['inference-header-content-length'];
  if (ihcl !== undefined) {
    // Only with a binary part, and counting the uncompressed JSON (facts 13, 14).
    expect(Number(ihcl)).toBeGreaterThan(0);
    if (answer.headers['content-encoding'] === undefined) {
      expect(answer.body.length).toBeGreaterThan(Number(ihcl));
    }
  }
  return tritonInfer(answer);
}

/**
 * Every input came back unchanged in its identity output, read as tritonclient reads it;
 * `binary` says which outputs must have come as binary data (as the request asked).
 */
function expectTritonIdentity(
  result: TritonInferResult,
  request: RecordedRequest,
  options: { only?: readonly string[]; binary: (output: string) => boolean },
): void {
  const response = result.getResponse() as { outputs: Array<{ [key: string]: Json }> };
  const sent = sentInputs(request).filter((t) => options.only?.includes(outputOf(t.name)) ?? true);
  expect(response.outputs.map((o) => o['name'])).toEqual(
    options.only ?? sent.map((t) => outputOf(t.name)),
  );
  for (const tensor of sent) {
    const name = outputOf(tensor.name);
    const entry = response.outputs.find((o) => o['name'] === name)!;
    expect(entry['datatype']).toBe(tensor.datatype);
    const isBinary = isObject(entry['parameters']) && 'binary_data_size' in entry['parameters'];
    expect(isBinary, `${name} as binary data`).toBe(options.binary(name));
    expect('data' in entry).toBe(!isBinary);
    const array = result.asNumpy(name)!;
    expect(array.shape).toEqual(tensor.shape);
    expect(array.dtype).toBe(
      isBinary && array.values.length === 0 ? 'float64' : npDtype(tensor.datatype),
    );
    expect(precise(tensor.datatype, array.values)).toEqual(precise(tensor.datatype, tensor.values));
  }
}

/** The outputs the request asked for as binary data (Triton's rules, README fact 6). */
function tritonBinaryOutputs(request: RecordedRequest): (output: string) => boolean {
  const header = requestHeader(request);
  const outputs = header['outputs'] as Array<{ [key: string]: Json }> | undefined;
  const all = isObject(header['parameters']) && header['parameters']['binary_data_output'] === true;
  return (name) => {
    const asked = outputs?.find((o) => o['name'] === name);
    const flag = isObject(asked?.['parameters']) ? asked['parameters']['binary_data'] : undefined;
    return typeof flag === 'boolean' ? flag : all;
  };
}

/** The common case: an FP32 identity infer on mnist, every input back as the client asked. */
async function tritonIdentityInfer(request: RecordedRequest): Promise<TritonInferResult> {
  const { answer } = await replay('tritonclient', request);
  const result = tritonOk(answer);
  expectTritonIdentity(result, request, { binary: tritonBinaryOutputs(request) });
  const response = result.getResponse() as { [key: string]: Json };
  expect(response['model_name']).toBe(modelInPath(request.path));
  expect(response['model_version']).toBe(version);
  return result;
}

const tritonCases: Record<string, (request: RecordedRequest, fixture: Fixture) => Promise<void>> = {
  async '01_server_live'(request) {
    const { answer } = await replay('tritonclient', request);
    expect(tritonHealth(answer)).toBe(true);
  },
  async '01b_server_live_503'(request) {
    // Recorded to show 503 → False; our live server answers 200 → True.
    const { answer } = await replay('tritonclient', request);
    expect(answer.status).toBe(200);
    expect(tritonHealth(answer)).toBe(true);
  },
  async '02_server_ready'(request) {
    const { answer } = await replay('tritonclient', request);
    expect(tritonHealth(answer)).toBe(true);
  },
  async '03_server_metadata'(request) {
    const { answer } = await replay('tritonclient', request);
    const returned = tritonJson(answer);
    expect(returned).toEqual(serverMetadata);
    expect((returned as { extensions: string[] }).extensions).toContain('binary_tensor_data');
  },
  async '04_model_ready'(request) {
    const { answer } = await replay('tritonclient', request);
    expect(tritonHealth(answer)).toBe(true);
  },
  async '04b_model_ready_version'(request) {
    expect(request.path).toBe('/v2/models/mnist/versions/1/ready');
    const { answer } = await replay('tritonclient', request);
    expect(tritonHealth(answer)).toBe(true);
  },
  async '04c_model_ready_404'(request) {
    const { answer } = await replay('tritonclient', request);
    expect(answer.status).toBe(404);
    expect(tritonHealth(answer)).toBe(false);
  },
  async '05_model_metadata'(request, fixture) {
    const { answer } = await replay('tritonclient', request);
    // Ours says what the capture server's canned answer said: mnist, FP32 [-1, 4] both ways.
    expect(tritonJson(answer)).toEqual((fixture.clientResult as { returned: Json }).returned);
  },
  async '05b_model_metadata_version'(request, fixture) {
    expect(request.path).toBe('/v2/models/mnist/versions/1');
    const { answer } = await replay('tritonclient', request);
    expect(tritonJson(answer)).toEqual((fixture.clientResult as { returned: Json }).returned);
  },
  async '05c_model_config'(request) {
    const { answer } = await replay('tritonclient', request);
    // A batched model: max_batch_size set, dims without the batch dimension (Triton's rule).
    expect(tritonJson(answer)).toEqual({
      name: 'mnist',
      platform: 'onnxruntime_onnx',
      backend: 'onnxruntime',
      max_batch_size: poolOptions.maxBatch,
      input: [{ name: 'input', data_type: 'TYPE_FP32', dims: [4] }],
      output: [{ name: 'output', data_type: 'TYPE_FP32', dims: [4] }],
    });
  },
  async '06_infer_json_fp32'(request) {
    const result = await tritonIdentityInfer(request);
    expect(result.asNumpy('output')!.values).toEqual([1, 2.5, -3, Math.fround(0.1)]);
  },
  async '06b_infer_json_nested_output_data'(request) {
    await tritonIdentityInfer(request);
  },
  async '06c_infer_json_no_content_type'(request) {
    expect(hasHeader(request, 'content-type')).toBe(false);
    await tritonIdentityInfer(request);
  },
  async '06d_infer_json_wrong_element_count'(request) {
    // Our JSON answer holds exactly as many elements as its shape says: as_numpy reshapes.
    await tritonIdentityInfer(request);
  },
  async '07_infer_binary_fp32'(request) {
    const { answer } = await replay('tritonclient', request);
    expect(answer.headers['inference-header-content-length']).toBeDefined();
    const result = tritonOk(answer);
    expectTritonIdentity(result, request, { binary: () => true });
    expect(result.asNumpy('output')!.values).toEqual([1, 2.5, -3, Math.fround(0.1)]);
  },
  async '07b_infer_binary_lowercase_header_no_content_type'(request) {
    expect(hasHeader(request, 'content-type')).toBe(false);
    expect(request.headerNamesAsSent).toContain('inference-header-content-length');
    await tritonIdentityInfer(request);
  },
  async '07c_infer_binary_missing_header_length'(request) {
    // A binary answer always carries the header: the client can split it.
    const { answer } = await replay('tritonclient', request);
    expect(answer.headers['inference-header-content-length']).toBeDefined();
    await tritonIdentityInfer(request);
  },
  async '07d_infer_binary_requested_json_answered'(request) {
    // Binary was asked for, so binary it is (the client would not notice otherwise).
    await tritonIdentityInfer(request);
  },
  async '08a_infer_mixed_json'(request) {
    // 2^53 + 1 as a JSON number: exact on the wire, but JavaScript's JSON reader rounds it.
    const text = recordedBody(request).toString('utf8');
    expect(text).toContain('"data":[1,-2,9007199254740993]');
    const { answer } = await replay('tritonclient', request);
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toBe('application/json');
    // A 400 naming the input and the element, and the way out (binary data).
    const error = tritonRaises(() => tritonInfer(answer));
    expect(error.str()).toMatch(/^\[400\] input in_int64: body\.inputs\[0\]\.data\[2\]: /);
    expect(error.str()).toContain('send binary data');
    const inputs = requestHeader(request)['inputs'] as Array<{ name: string }>;
    expect(inputs[0]!.name).toBe('in_int64');
  },
  async '08b_infer_mixed_binary'(request) {
    const { answer } = await replay('tritonclient', request);
    const result = tritonOk(answer);
    expectTritonIdentity(result, request, { binary: () => true });
    expect(result.asNumpy('out_int64')!.values).toEqual([1n, -2n, 9007199254740993n]);
    // Binary BYTES come back as Python bytes, length prefixes removed (fact 15).
    const bytes = result.asNumpy('out_bytes')!;
    expect(bytes.values.every((v) => Buffer.isBuffer(v))).toBe(true);
    expect(bytes.values.map((v) => (v as Buffer).toString('utf8'))).toEqual(['hello', 'héllo', '']);
    expect(result.asNumpy('out_fp16')!.values).toEqual([1.5, -0.25, 0.0999755859375]);
    expect(result.asNumpy('out_bool')!.values).toEqual([true, false, true]);
    expect(result.asNumpy('out_uint8')).toEqual({
      dtype: 'uint8',
      shape: [1, 3],
      values: [0, 127, 255],
    } satisfies NdArray);
  },
  async '08c_infer_mixed_json_and_binary_outputs'(request) {
    const { answer } = await replay('tritonclient', request);
    const result = tritonOk(answer);
    // In the asked order: out_uint8 as JSON data, then out_fp16 taking the only binary slice.
    expectTritonIdentity(result, request, {
      only: ['out_uint8', 'out_fp16'],
      binary: (name) => name === 'out_fp16',
    });
  },
  async '09_infer_no_outputs_requested'(request) {
    // No outputs asked, binary_data_output: every output as binary data.
    expect(requestHeader(request)['parameters']).toEqual({ binary_data_output: true });
    expect(hasHeader(request, 'inference-header-content-length')).toBe(false);
    const result = await tritonIdentityInfer(request);
    expect(result.asNumpy('output')!.dtype).toBe('float32');
  },
  async '09b_infer_no_outputs_binary_input_id_params'(request) {
    const result = await tritonIdentityInfer(request);
    expect((result.getResponse() as { id: string }).id).toBe('req-42');
  },
  async '10a_error_string'(request) {
    await tritonIdentityInfer(request);
  },
  async '10b_error_object_wrong_shape'(request) {
    await tritonIdentityInfer(request);
  },
  async '10c_error_empty_body'(request) {
    await tritonIdentityInfer(request);
  },
  async '10d_error_non_json_body'(request) {
    await tritonIdentityInfer(request);
  },
  async '10e_metadata_error'(request) {
    const { answer } = await replay('tritonclient', request);
    const error = tritonRaises(() => tritonJson(answer));
    expect(error.str()).toBe('[404] model nope is not served here (this worker serves mnist)');
  },
  async '10f_infer_201'(request) {
    // tritonclient takes exactly 200: tritonOk checks it.
    await tritonIdentityInfer(request);
  },
  async '10g_error_without_error_key'(request) {
    await tritonIdentityInfer(request);
  },
  async '11a_request_gzip_json'(request) {
    expect(request.headers['content-encoding']).toBe('gzip');
    expect(hasHeader(request, 'inference-header-content-length')).toBe(false);
    await tritonIdentityInfer(request);
  },
  async '11b_request_deflate_binary'(request) {
    // zlib-wrapped deflate; the header counts the uncompressed JSON, past the compressed size.
    expect(request.headers['content-encoding']).toBe('deflate');
    expect(Number(request.headers['inference-header-content-length'])).toBeGreaterThan(
      request.bodyLength,
    );
    await tritonIdentityInfer(request);
  },
  async '11c_response_gzip_binary'(request) {
    expect(request.headers['accept-encoding']).toBe('gzip');
    const { answer } = await replay('tritonclient', request);
    expect([undefined, 'gzip']).toContain(answer.headers['content-encoding']);
    await tritonIdentityInfer(request);
  },
  async '11d_response_deflate_json'(request) {
    expect(request.headers['accept-encoding']).toBe('deflate');
    const { answer } = await replay('tritonclient', request);
    expect([undefined, 'deflate']).toContain(answer.headers['content-encoding']);
    await tritonIdentityInfer(request);
  },
  async '12a_infer_model_version'(request) {
    expect(request.path).toBe('/v2/models/mnist/versions/1/infer');
    await tritonIdentityInfer(request);
  },
  async '12b_async_infer'(request) {
    await tritonIdentityInfer(request);
  },
  async '12c_infer_custom_header_query'(request) {
    expect(request.query).toBe('trace=1');
    expect(request.headers['x-request-id']).toBe('abc');
    await tritonIdentityInfer(request);
  },
  async '12d_infer_model_name_quoting'(request) {
    // "my model/v2" quoted with its slash kept: no OIP route has that many segments.
    expect(request.path).toBe('/v2/models/my%20model/v2/infer');
    const { answer } = await replay('tritonclient', request);
    const error = tritonRaises(() => tritonInfer(answer));
    expect(error.str()).toBe('[404] no route for POST /v2/models/my%20model/v2/infer');
  },
  async '12e_infer_classification_param'(request) {
    // class_count=2 asks for Triton's classification extension: the top 2 classes as BYTES
    // "value:index" strings in a [1, 2] tensor. A server without the extension must refuse
    // the parameter (a printable 400 naming it), not answer the raw [1, 4] scores as if the
    // client had not asked. FAILS until the server does one or the other (see the report).
    expect(requestHeader(request)['outputs']).toEqual([
      { name: 'output', parameters: { classification: 2, binary_data: false } },
    ]);
    const { answer } = await replay('tritonclient', request);
    if (answer.status === 200) {
      // Triton writes each class as "<score>:<index>" (std::to_string: "2.500000:1").
      const classes = tritonInfer(answer).asNumpy('output')!;
      expect({ dtype: classes.dtype, shape: classes.shape }).toEqual({
        dtype: 'object',
        shape: [1, 2],
      });
      const text = classes.values.map((v) => (Buffer.isBuffer(v) ? v.toString('utf8') : v));
      expect(text).toEqual([
        expect.stringMatching(/^2\.50*:1$/),
        expect.stringMatching(/^1(\.0*)?:0$/),
      ]);
    } else {
      expect(answer.status).toBe(400);
      expect(tritonRaises(() => tritonInfer(answer)).str()).toMatch(/classification/);
    }
  },
  async '13a_binary_answer_chunked'(request) {
    await tritonIdentityInfer(request);
  },
  async '13b_binary_empty_tensor'(request) {
    // The header announces binary framing with nothing after the JSON (IHCL == Content-Length):
    // that is read fine; the empty batch itself is what this server refuses, printably.
    expect(request.headers['inference-header-content-length']).toBe(
      request.headers['content-length'],
    );
    const { answer } = await replay('tritonclient', request);
    const error = tritonRaises(() => tritonInfer(answer));
    expect(error.str()).toBe('[400] body.inputs: input input has an empty batch');
  },
  async '13c_json_answer_with_zero_header_length'(request) {
    const { answer } = await replay('tritonclient', request);
    // A JSON-only answer carries no Inference-Header-Content-Length at all.
    expect(answer.headers['inference-header-content-length']).toBeUndefined();
    await tritonIdentityInfer(request);
  },
};

// ---------------------------------------------------------------------------------------------
// kserve expectations

/** Runs `fn`; the message of the HTTPStatusError it raised, or a failure if it returned. */
function kserveRaises(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof HTTPStatusError) return err.message;
    throw err;
  }
  throw new Error('expected kserve to raise httpx.HTTPStatusError');
}

/** What kserve asks for as binary: only outputs it names with binary_data true (fact 7). */
function kserveBinaryOutputs(request: RecordedRequest): (output: string) => boolean {
  const outputs = requestHeader(request)['outputs'] as Array<{ [key: string]: Json }> | undefined;
  return (name) => {
    const asked = outputs?.find((o) => o['name'] === name);
    return isObject(asked?.['parameters']) && asked['parameters']['binary_data'] === true;
  };
}

/** Every input came back unchanged, as InferResponse.from_bytes hands it over. */
async function kserveIdentityInfer(request: RecordedRequest): Promise<KserveResponse> {
  const { answer, url } = await replay('kserve', request);
  expect(answer.status, answer.body.toString('utf8')).toBe(200);
  const binary = kserveBinaryOutputs(request);
  const header = parseJsonExact(
    answer.body
      .subarray(0, Number(answer.headers['inference-header-content-length'] ?? answer.body.length))
      .toString('utf8'),
  ) as { outputs: Array<{ [key: string]: Json }> };
  const response = kserveInfer(answer, url);
  const sent = sentInputs(request);
  const body = requestHeader(request);
  expect(response.model_name).toBe(modelInPath(request.path));
  expect(response.id).toBe(body['id'] ?? null);
  expect(response.outputs.map((o) => o.name)).toEqual(sent.map((t) => outputOf(t.name)));
  for (const tensor of sent) {
    const name = outputOf(tensor.name);
    const output = response.outputs.find((o) => o.name === name)!;
    const entry = header.outputs.find((o) => o['name'] === name)!;
    const isBinary = isObject(entry['parameters']) && 'binary_data_size' in entry['parameters'];
    expect(isBinary, `${name} as binary data`).toBe(binary(name));
    expect(output.datatype).toBe(tensor.datatype);
    expect(output.shape).toEqual(tensor.shape);
    const data = flatten(output.data as Json) as Element[];
    expect(precise(tensor.datatype, data)).toEqual(precise(tensor.datatype, tensor.values));
    if (tensor.datatype === 'BYTES') expect(data.every((v) => typeof v === 'string')).toBe(true);
  }
  return response;
}

const kserveCases: Record<string, (request: RecordedRequest, fixture: Fixture) => Promise<void>> = {
  async '01_server_live'(request) {
    const { answer, url } = await replay('kserve', request);
    expect(kserveServerHealth(answer, 'live', url)).toBe(true);
  },
  async '01b_server_live_empty_body'(request) {
    // kserve needs a JSON body here (an empty one raised JSONDecodeError): ours has one.
    const { answer, url } = await replay('kserve', request);
    expect(answer.body.length).toBeGreaterThan(0);
    expect(kserveServerHealth(answer, 'live', url)).toBe(true);
  },
  async '01c_server_live_503'(request) {
    const { answer, url } = await replay('kserve', request);
    expect(kserveServerHealth(answer, 'live', url)).toBe(true);
  },
  async '02_server_ready'(request) {
    const { answer, url } = await replay('kserve', request);
    expect(kserveServerHealth(answer, 'ready', url)).toBe(true);
  },
  async '02b_server_ready_false_200'(request) {
    const { answer, url } = await replay('kserve', request);
    expect(kserveServerHealth(answer, 'ready', url)).toBe(true);
  },
  async '03_model_ready'(request) {
    const { answer } = await replay('kserve', request);
    expect(kserveModelReady(answer)).toBe(true);
  },
  async '03b_model_ready_404'(request) {
    const { answer } = await replay('kserve', request);
    expect(answer.status).toBe(404);
    expect(kserveModelReady(answer)).toBe(false);
  },
  async '03c_model_ready_200_ready_false'(request) {
    const { answer } = await replay('kserve', request);
    expect(kserveModelReady(answer)).toBe(true);
  },
  async '04_infer_json_fp32'(request) {
    expect(requestHeader(request)['model_name']).toBe('mnist');
    const response = await kserveIdentityInfer(request);
    expect(response.id).toBe('req-1');
    expect(response.outputs[0]!.parameters).toBeNull();
  },
  async '04b_infer_json_no_outputs_no_id'(request) {
    // kserve always sends an id (a fresh uuid4) and, with no outputs, no binary_data_output:
    // the answer is JSON.
    expect(requestHeader(request)['id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(requestHeader(request)['parameters']).toBeUndefined();
    await kserveIdentityInfer(request);
  },
  async '04c_infer_plain_dict'(request) {
    expect(Object.keys(requestHeader(request))).toEqual(['inputs']);
    await kserveIdentityInfer(request);
  },
  async '04d_infer_json_nested_no_content_type'(request) {
    await kserveIdentityInfer(request);
  },
  async '04e_infer_answer_without_model_name'(request) {
    // Ours always names the model: kserve's KeyError cannot happen.
    await kserveIdentityInfer(request);
  },
  async '04f_infer_answer_output_without_data'(request) {
    // Every JSON output carries data.
    await kserveIdentityInfer(request);
  },
  async '05_infer_binary_fp32'(request) {
    const response = await kserveIdentityInfer(request);
    expect(response.outputs[0]!.parameters).toEqual({});
  },
  async '05b_infer_binary_answer_gzip'(request) {
    const { answer } = await replay('kserve', request);
    // Compressed or not (kserve accepts gzip, deflate, br), IHCL counts the plain JSON.
    expect([undefined, 'gzip', 'deflate', 'br']).toContain(answer.headers['content-encoding']);
    await kserveIdentityInfer(request);
  },
  async '05c_infer_binary_answer_missing_header_length'(request) {
    const { answer } = await replay('kserve', request);
    expect(answer.headers['inference-header-content-length']).toBeDefined();
    await kserveIdentityInfer(request);
  },
  async '06a_infer_mixed_json'(request) {
    // Non-ASCII raw UTF-8 (not \u-escaped), and 2^53 + 1 as a JSON number.
    const text = recordedBody(request).toString('utf8');
    expect(text).toContain('"héllo"');
    expect(text).toContain('[1,-2,9007199254740993]');
    const { answer, url } = await replay('kserve', request);
    expect(answer.headers['content-type']).toBe('application/json');
    const message = kserveRaises(() => kserveInfer(answer, url));
    expect(message).toMatch(/^input in_int64: body\.inputs\[0\]\.data\[2\]: .*send binary data/);
    expect(message.endsWith(`, '400 Bad Request' for url '${url}'`)).toBe(true);
  },
  async '06b_infer_mixed_binary'(request) {
    const response = await kserveIdentityInfer(request);
    const data = (name: string) => response.outputs.find((o) => o.name === name)!.data;
    expect(data('out_int64')).toEqual([1n, -2n, 9007199254740993n]);
    expect(data('out_bytes')).toEqual(['hello', 'héllo', '']);
    expect(data('out_fp16')).toEqual([1.5, -0.25, 0.0999755859375]);
  },
  async '06d_infer_fp16_json_answer'(request) {
    // FP16 in as binary, no outputs asked: FP16 out as JSON numbers.
    const response = await kserveIdentityInfer(request);
    expect(response.outputs[0]!.datatype).toBe('FP16');
  },
  async '06e_infer_empty_binary_input'(request) {
    // `"data": null` beside `binary_data_size: 0` for the empty BYTES input.
    const inputs = requestHeader(request)['inputs'] as Array<{ [key: string]: Json }>;
    expect(inputs[0]).toEqual({
      name: 'in_bytes',
      shape: [0],
      datatype: 'BYTES',
      parameters: { binary_data_size: 0 },
      data: null,
    });
    const response = await kserveIdentityInfer(request);
    expect(response.outputs.find((o) => o.name === 'out_bytes')).toMatchObject({
      shape: [0],
      data: [],
    });
  },
  async '08a_error_string'(request) {
    await kserveIdentityInfer(request);
  },
  async '08b_error_object_wrong_shape'(request) {
    await kserveIdentityInfer(request);
  },
  async '08c_error_content_type_with_charset'(request) {
    await kserveIdentityInfer(request);
  },
  async '08d_error_empty_body'(request) {
    await kserveIdentityInfer(request);
  },
  async '08e_infer_201'(request) {
    await kserveIdentityInfer(request);
  },
  async '08f_error_without_error_key'(request) {
    await kserveIdentityInfer(request);
  },
  async '09a_infer_model_version_ignored'(request) {
    expect(request.path).toBe('/v2/models/mnist/infer');
    expect(requestHeader(request)['model_version']).toBeUndefined();
    await kserveIdentityInfer(request);
  },
  async '09b_infer_base_path_and_header'(request) {
    // The base path belongs to whatever routes to us; behind a proxy that strips it, this is
    // a plain infer. Addressed to us directly, it is a 404 whose message both clients must be
    // able to print (tritonclient supports a base path in its URL too). FAILS until errors on
    // every path, not only /v2/..., are `application/json` `{"error": "<string>"}`.
    expect(request.path).toBe('/prefix/v2/models/mnist/infer');
    expect(request.headers['x-request-id']).toBe('abc');
    const proxied = await replay('kserve', request, '/v2/models/mnist/infer');
    expect(proxied.answer.status).toBe(200);
    expect(kserveInfer(proxied.answer, proxied.url).outputs[0]!.name).toBe('output');
    const { answer, url } = await replay('kserve', request);
    expect(answer.status).toBe(404);
    expect(kserveRaises(() => kserveInfer(answer, url))).toBe(
      `no route for POST /prefix/v2/models/mnist/infer, '404 Not Found' for url '${url}'`,
    );
    expect(tritonRaises(() => tritonInfer(answer)).str()).toBe(
      '[404] no route for POST /prefix/v2/models/mnist/infer',
    );
  },
};

// ---------------------------------------------------------------------------------------------

const suites: Array<{
  client: ClientName;
  cases: Record<string, (request: RecordedRequest, fixture: Fixture) => Promise<void>>;
}> = [
  { client: 'tritonclient', cases: tritonCases },
  { client: 'kserve', cases: kserveCases },
];

for (const { client, cases } of suites) {
  describe(`${client} replay (test/fixtures/oip-clients/${client})`, () => {
    const fixtures = loadFixtures(client);

    it('has a replay for every fixture with a request, and only for those', () => {
      const withRequest = [...fixtures].filter(([, f]) => f.request !== null).map(([n]) => n);
      expect(Object.keys(cases).sort()).toEqual(withRequest.sort());
    });

    for (const [name, fixture] of fixtures) {
      const { request } = fixture;
      if (request === null) continue;
      it(`${name}: ${fixture.step}`, async () => {
        checkRecordedRequest(client, request);
        await cases[name]!(request, fixture);
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The ports themselves: fed the answers the capture server gave, they must return what the real
// clients returned (each fixture's clientResult), or the replays above would prove nothing.

/** The capture server's reason phrases (capture_server.py `_send`). */
const captureReasons: Readonly<Record<number, string>> = {
  200: 'OK',
  400: 'Bad Request',
  404: 'Not Found',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** Where a port's wording is known not to match: orjson's decode-error text (README, kserve). */
const wordingDiffers = new Set(['kserve/05c_infer_binary_answer_missing_header_length']);

/** A value as the recording driver's `jsonable` wrote it (bytes as {bytes, base64}). */
function jsonable(value: unknown): unknown {
  if (Buffer.isBuffer(value)) {
    return {
      bytes: value.every((b) => b < 128) ? value.toString('latin1') : null,
      base64: value.toString('base64'),
    };
  }
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value;
  if (Array.isArray(value)) return value.map(jsonable);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonable(v)]));
  }
  return value;
}

function describeError(err: unknown): unknown {
  if (err instanceof InferenceServerException) {
    try {
      return { raised: 'tritonclient.utils.InferenceServerException', str: err.str() };
    } catch (strErr) {
      const e = strErr as PyError;
      return {
        raised: 'tritonclient.utils.InferenceServerException',
        str: null,
        strRaised: `${e.pyClass.replace(/^builtins\./, '')}: ${e.str}`,
      };
    }
  }
  if (err instanceof PyError) return { raised: err.pyClass, str: err.str };
  throw err;
}

const ndarray = (array: NdArray) => ({
  ndarray: { dtype: array.dtype, shape: array.shape, flatValues: jsonable(array.values) },
});

/** What the tritonclient port returns for a recorded answer, as the driver recorded results. */
function tritonPortResult(request: RecordedRequest, answer: WireAnswer, recorded: Json): unknown {
  try {
    if (request.method === 'GET') {
      if (/\/health\/|\/ready$/.test(request.path)) return { returned: tritonHealth(answer) };
      return { returned: jsonable(tritonJson(answer)) };
    }
    const result = tritonInfer(answer);
    const out: Record<string, unknown> = { get_response: jsonable(result.getResponse()) };
    for (const key of Object.keys(recorded as object)) {
      const name = /^as_numpy\((.*)\)$/.exec(key)?.[1];
      if (name === undefined) continue;
      try {
        out[key] = ndarray(result.asNumpy(name)!);
      } catch (err) {
        out[key] = { exception: describeError(err) };
      }
    }
    return out;
  } catch (err) {
    return { exception: describeError(err) };
  }
}

/** What the kserve port returns for a recorded answer, as the driver recorded results. */
function kservePortResult(request: RecordedRequest, answer: WireAnswer): unknown {
  const url = `http://127.0.0.1:18000${request.path}`;
  try {
    if (request.path === '/v2/health/live' || request.path === '/v2/health/ready') {
      const key = request.path.endsWith('live') ? 'live' : 'ready';
      return { returned: kserveServerHealth(answer, key, url) };
    }
    if (request.method === 'GET') return { returned: kserveModelReady(answer) };
    const response = kserveInfer(answer, url);
    return jsonable({
      type: 'InferResponse',
      id: response.id,
      model_name: response.model_name,
      model_version: null,
      parameters: response.parameters,
      outputs: response.outputs.map((o) => ({
        name: o.name,
        shape: o.shape,
        datatype: o.datatype,
        data: o.data,
        parameters: o.parameters,
      })),
    });
  } catch (err) {
    return { exception: describeError(err) };
  }
}

describe('the client ports read the recorded answers as the real clients did', () => {
  for (const client of ['tritonclient', 'kserve'] as const) {
    for (const [name, fixture] of loadFixtures(client)) {
      const { request, expectedAnswer } = fixture;
      if (request === null || expectedAnswer === null) continue;
      it(`${client}/${name}`, () => {
        const answer: WireAnswer = {
          status: expectedAnswer.status,
          reason: captureReasons[expectedAnswer.status] ?? 'Status',
          headers: expectedAnswer.headers,
          chunked: expectedAnswer.headers['transfer-encoding'] === 'chunked',
          body: Buffer.from(expectedAnswer.bodyBase64, 'base64'),
        };
        const recorded = fixture.clientResult as Json;
        const ours =
          client === 'tritonclient'
            ? tritonPortResult(request, answer, recorded)
            : kservePortResult(request, answer);
        if (wordingDiffers.has(`${client}/${name}`)) {
          const raised = (r: unknown) =>
            (r as { exception?: { raised: string } }).exception?.raised;
          expect(raised(ours)).toBe(raised(recorded));
          expect(raised(ours)).toBeDefined();
        } else {
          // The recording holds more (repr, message, as_numpy() of kserve outputs): ours is a part.
          expect(recorded).toMatchObject(ours as object);
        }
      });
    }
  }
});

describe('the 12 basic tritonclient steps (docblock table)', () => {
  const steps: ReadonlyArray<readonly [string, readonly string[]]> = [
    ['live', ['01_server_live', '01b_server_live_503']],
    ['ready', ['02_server_ready']],
    ['server metadata', ['03_server_metadata']],
    ['model ready', ['04_model_ready', '04c_model_ready_404']],
    ['model metadata', ['05_model_metadata', '05c_model_config']],
    ['infer JSON in / JSON out', ['06_infer_json_fp32', '06b_infer_json_nested_output_data']],
    [
      'infer binary in / out',
      ['07_infer_binary_fp32', '08b_infer_mixed_binary', '12b_async_infer'],
    ],
    [
      'infer without Content-Type',
      ['06c_infer_json_no_content_type', '07b_infer_binary_lowercase_header_no_content_type'],
    ],
    [
      'binary extension framing',
      [
        '07b_infer_binary_lowercase_header_no_content_type',
        '08c_infer_mixed_json_and_binary_outputs',
        '09_infer_no_outputs_requested',
        '09b_infer_no_outputs_binary_input_id_params',
        '13b_binary_empty_tensor',
      ],
    ],
    ['error as string', ['10a_error_string', '10e_metadata_error', '12d_infer_model_name_quoting']],
    [
      'versioned URL',
      ['04b_model_ready_version', '05b_model_metadata_version', '12a_infer_model_version'],
    ],
    [
      'compression',
      [
        '11a_request_gzip_json',
        '11b_request_deflate_binary',
        '11c_response_gzip_binary',
        '11d_response_deflate_json',
      ],
    ],
  ];

  it('lists 12 steps, each replayed by at least one test', () => {
    expect(steps).toHaveLength(12);
    const fixtures = loadFixtures('tritonclient');
    for (const [, names] of steps) {
      expect(names.length).toBeGreaterThan(0);
      for (const name of names) {
        expect(fixtures.get(name)?.request, name).toBeTruthy();
        expect(tritonCases[name], name).toBeDefined();
      }
    }
  });
});
