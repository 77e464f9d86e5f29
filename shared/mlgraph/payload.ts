/**
 * What travels along a graph's edges: a JSON body, or an OIP request or answer in the binary
 * tensor extension (a JSON header, then raw tensor bytes, its length in
 * Inference-Header-Content-Length), passed on as bytes: no tensor is printed or parsed as text
 * on its way through the graph. Routers, joiners and outlier scorers read JSON: they get the
 * JSON header of a binary body (a router's conditions read `parameters`), or, where the tensors
 * themselves matter (a join's inputs), the answer with its tensors decoded into JSON data.
 * A JSON body is parsed only when something reads it (a model node forwards the bytes it got):
 * an MNIST digit is 6 kB of numbers, and parsing and printing it again cost more than the hop.
 */
import { ValidationError } from '../errors/index.js';
import { formatInferResponse, parseInferResponse } from '../inference/protocol.js';
import type { Spliced } from './join-answer.js';

type Payload = (
  | {
      kind: 'json';
      /** The bytes as received, when it was received (sent on as they are). */
      readonly raw: Buffer | undefined;
      /** The parsed body; parsed on first read. */
      readonly value: unknown;
    }
  | { kind: 'binary'; bytes: Buffer; headerLength: number; contentType: string }
) & {
  /** A model's answer (so a model after it gets it as a request: `answerAsRequest`). */
  answer?: boolean;
};

/** A JSON payload made here. */
function jsonPayload(value: unknown): Payload {
  return { kind: 'json', raw: undefined, value };
}

/** A JSON payload from its bytes, parsed when first read; ValidationError when it is not JSON. */
function jsonBytes(raw: Buffer): Payload {
  let parsed: { value: unknown } | undefined;
  return {
    kind: 'json',
    raw,
    get value() {
      if (parsed === undefined) {
        try {
          parsed = {
            value: raw.length === 0 ? undefined : (JSON.parse(raw.toString('utf8')) as unknown),
          };
        } catch {
          throw new ValidationError('body: not JSON (and no Inference-Header-Content-Length)');
        }
      }
      return parsed.value;
    },
  };
}

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
  return jsonBytes(bytes);
}

const jsonHeaders: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'application/json',
});

/** The body and headers to send a payload with. */
function sendable(payload: Payload): {
  body: Buffer | string;
  headers: Readonly<Record<string, string>>;
} {
  if (payload.kind === 'json') {
    return { body: payload.raw ?? JSON.stringify(payload.value ?? null), headers: jsonHeaders };
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

/** The JSON part as text: a JSON body's bytes as received, or a binary body's header. */
function headText(payload: Payload): Buffer | string {
  if (payload.kind === 'json') return payload.raw ?? JSON.stringify(payload.value ?? null);
  return payload.bytes.subarray(0, payload.headerLength);
}

/** The whole payload as JSON text (a binary answer's tensors decoded). */
function jsonText(payload: Payload): Buffer | string {
  if (payload.kind === 'json') return headText(payload);
  return JSON.stringify(asJson(payload) ?? null);
}

/**
 * A model's answer as the next model's request (a sequence): its `outputs` become `inputs`,
 * tensor for tensor, binary bytes untouched. Anything else goes as it is.
 */
function answerAsRequest(payload: Payload): Payload {
  if (payload.answer !== true) return payload;
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
  if (payload.kind === 'json') return jsonPayload(request);
  const header = Buffer.from(JSON.stringify(request));
  return {
    kind: 'binary',
    bytes: Buffer.concat([header, payload.bytes.subarray(payload.headerLength)]),
    headerLength: header.length,
    contentType: payload.contentType,
  };
}

/**
 * A payload as a part of a spliced object (a join's input, one of several answers): its JSON
 * text as it is (a binary body's header) and its tensor bytes. Nothing is parsed or printed
 * again, except a JSON value made here (never received as bytes).
 */
function splicePart(payload: Payload): { json: Buffer | string; tensors?: Buffer } {
  if (payload.kind === 'json') return { json: headText(payload) };
  return {
    json: payload.bytes.subarray(0, payload.headerLength),
    tensors: payload.bytes.subarray(payload.headerLength),
  };
}

/** A spliced object as a payload: JSON, or binary when any part brought tensor bytes. */
function splicedPayload(spliced: Spliced): Payload {
  if (spliced.tensors.length === 0) return jsonBytes(spliced.json);
  return {
    kind: 'binary',
    bytes: Buffer.concat([spliced.json, ...spliced.tensors]),
    headerLength: spliced.json.length,
    contentType: 'application/octet-stream',
  };
}

export {
  payloadOf,
  jsonPayload,
  jsonBytes,
  sendable,
  jsonHead,
  headText,
  jsonText,
  asJson,
  answerAsRequest,
  splicePart,
  splicedPayload,
};
export type { Payload };
