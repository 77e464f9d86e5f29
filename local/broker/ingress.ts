/**
 * The development broker's HTTP ingress: `POST /<namespace>/<broker>` with one CloudEvent is
 * answered 202 and handed to `ingest`; anything else gets an error in the project's format
 * (see broker.ts and docs/dev-broker.md).
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import {
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
  errorAnswer,
} from '../../shared/errors/index.js';
import type { BrokerState } from './broker-state.js';
import { decodeHttpEvent } from './codec.js';
import { ingest } from './dispatch.js';

/** Reads a request body, refusing (413) one over `limit` bytes before or while reading it. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? NaN);
    const tooLarge = () =>
      new PayloadTooLargeError(`request body exceeds the limit of ${limit} bytes`);
    if (declared > limit) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        reject(tooLarge());
      } else chunks.push(chunk);
    });
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
}

/** Writes an error as the project's JSON error body and closes the connection. */
function answer(res: ServerResponse, err: unknown): void {
  const { status, headers, body } = errorAnswer(err);
  const text = JSON.stringify(body);
  res.shouldKeepAlive = false;
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** The broker a request is for, from its path and method; throws the 400, 404 or 405 to send. */
function targetBroker(state: BrokerState, req: IncomingMessage): [string, string] {
  const path = (req.url ?? '/').split('?', 1)[0]!;
  let parts: string[];
  try {
    parts = path
      .split('/')
      .filter((p) => p !== '')
      .map((p) => decodeURIComponent(p));
  } catch {
    throw new ValidationError(`request path ${JSON.stringify(path)} is not valid percent-encoding`);
  }
  if (parts.length !== 2) {
    throw new NotFoundError(`no broker at ${path}: the ingress serves /<namespace>/<broker>`);
  }
  const [namespace, name] = parts as [string, string];
  if (!state.brokers.has(`${namespace}/${name}`)) {
    throw new NotFoundError(`broker ${namespace}/${name} does not exist`);
  }
  if (req.method !== 'POST') {
    throw new MethodNotAllowedError(`${req.method ?? ''} ${path}: send events with POST`, ['POST']);
  }
  return [namespace, name];
}

/** Serves one request; throws what `answer` turns into an error response. */
async function handle(
  state: BrokerState,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const [namespace, name] = targetBroker(state, req);
  const body = await readBody(req, state.bodyLimit);
  const event = decodeHttpEvent(req.headers, body);
  if (event === undefined) {
    throw new ValidationError(
      'the request is not a CloudEvent: send binary mode (ce-specversion, ce-id, ce-source and ce-type headers) or structured mode (Content-Type: application/cloudevents+json)',
    );
  }
  ingest(state, namespace, name, event);
  res.writeHead(202, { 'content-length': '0' });
  res.end();
}

/** The ingress server, not listening. */
function createIngress(state: BrokerState): Server {
  return createServer((req, res) => {
    handle(state, req, res).catch((err: unknown) => {
      req.resume();
      if (res.headersSent) res.destroy();
      else answer(res, err);
    });
  });
}

export { createIngress };
