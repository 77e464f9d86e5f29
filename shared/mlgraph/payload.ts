/**
 * What travels along a graph's edges: a JSON body, or an OIP request or answer in the binary
 * tensor extension (a JSON header, then raw tensor bytes, its length in
 * Inference-Header-Content-Length), passed on as bytes: no tensor is printed or parsed as text
 * on its way through the graph. Routers, joiners and outlier scorers read JSON: they get the
 * JSON header of a binary body (a router's conditions read `parameters`), or, where the tensors
 * themselves matter (a join's inputs), the answer with its tensors decoded into JSON data.
 */
import { ValidationError } from '../errors/index.js';
import { formatInferResponse, parseInferResponse } from '../inference/protocol.js';

type Payload =
  | { kind: 'json'; value: unknown }
  | { kind: 'binary'; bytes: Buffer; headerLength: number; contentType: string };

const headerLengthName = 'inference-header-content-length';

/** A body as received: binary when it says where its JSON header ends. */
function payloadOf(
  bytes: Buffer,
  contentType: string | undefined,
  headerLength: string | null | undefined,
): Payload {
  if (headerLength !== undefined && headerLength !== null) {
    const length = Number(headerLength);
    if (!Number.isInteger(length) || length < 0 || length > bytes.length)
      throw new ValidationError(
        `${headerLengthName}: ${headerLength} is not a length within the ${bytes.length}-byte body`,
      );
    return {
      kind: 'binary',
      bytes,
      headerLength: length,
      contentType: contentType ?? 'application/octet-stream',
    };
  }
  if (bytes.length === 0) return { kind: 'json', value: undefined };
  try {
    return { kind: 'json', value: JSON.parse(bytes.toString('utf8')) as unknown };
  } catch {
    throw new ValidationError('body: not JSON (and no Inference-Header-Content-Length)');
  }
}

/** The body and headers to send a payload with. */
function sendable(payload: Payload): { body: Buffer | string; headers: Record<string, string> } {
  if (payload.kind === 'json') {
    return {
      body: JSON.stringify(payload.value ?? null),
      headers: { 'content-type': 'application/json' },
    };
  }
  return {
    body: payload.bytes,
    headers: {
      'content-type': payload.contentType,
      [headerLengthName]: String(payload.headerLength),
    },
  };
}

/** The JSON part: the value, or a binary body's header. */
function jsonHead(payload: Payload): unknown {
  if (payload.kind === 'json') return payload.value;
  return JSON.parse(payload.bytes.subarray(0, payload.headerLength).toString('utf8')) as unknown;
}

/** The whole payload as JSON: a binary OIP answer with its tensors decoded. */
function asJson(payload: Payload): unknown {
  if (payload.kind === 'json') return payload.value;
  const head = jsonHead(payload) as { model_name?: unknown; model_version?: unknown; id?: unknown };
  const tensors = parseInferResponse(payload.bytes, payload.headerLength);
  const answer = formatInferResponse(
    {
      id: typeof head.id === 'string' ? head.id : undefined,
      outputs: undefined,
      binaryOutputs: new Set(),
    },
    {
      name: typeof head.model_name === 'string' ? head.model_name : '',
      version: typeof head.model_version === 'string' ? head.model_version : '',
      served: Object.entries(tensors).map(([name, t]) => ({
        name,
        datatype: t.datatype,
        shape: t.shape,
      })),
    },
    tensors,
  );
  return JSON.parse(answer.header) as unknown;
}

/**
 * A model's answer as the next model's request (a sequence): its `outputs` become `inputs`,
 * tensor for tensor, binary bytes untouched. Anything else goes as it is.
 */
function answerAsRequest(payload: Payload): Payload {
  const head = jsonHead(payload);
  if (typeof head !== 'object' || head === null || !('outputs' in head) || 'inputs' in head)
    return payload;
  const {
    outputs,
    model_name: _name,
    model_version: _version,
    ...rest
  } = head as Record<string, unknown>;
  const request = { ...rest, inputs: outputs };
  if (payload.kind === 'json') return { kind: 'json', value: request };
  const header = Buffer.from(JSON.stringify(request));
  return {
    kind: 'binary',
    bytes: Buffer.concat([header, payload.bytes.subarray(payload.headerLength)]),
    headerLength: header.length,
    contentType: payload.contentType,
  };
}

export { payloadOf, sendable, jsonHead, asJson, answerAsRequest, headerLengthName };
export type { Payload };
