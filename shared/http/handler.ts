/**
 * The request path shared by every function: health and metrics endpoints, CloudEvent decoding
 * and dispatch by type, plain HTTP routes, and one answer contract (docs/writing-a-function.md "Answers").
 * It uses node:http types only, so it runs the same under functions-framework's Express app.
 *
 * The path is synchronous up to the function's own handler, and the only promise per request is
 * the one that handler returns: functions-framework loads `domain`, which turns on async hooks
 * for every promise in the process, so each avoided promise is measurable throughput.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import {
  MethodNotAllowedError,
  NotFoundError,
  UnsupportedMediaTypeError,
  ValidationError,
  errorAnswer,
} from '../errors/index.js';
import { decodeEvent, encodeBinary, parseMediaType } from '../events/index.js';
import type { IncomingEvent, MediaType } from '../events/index.js';
import { decodeText, isJsonMedia, parseJson } from '../events/media.js';
import type { Logger, Telemetry } from '../telemetry/index.js';
import type {
  Answer,
  EventRoute,
  FunctionDefinition,
  HttpRoute,
  RequestContext,
} from './define.js';
import { startSpan } from './trace.js';

interface HandlerOptions {
  telemetry: Telemetry;
  readinessTimeoutMs: number;
}

/** A request whose body the front server has already read (see server.ts). */
type BufferedRequest = IncomingMessage & { rawBody?: Buffer };

/** What the handler writes: a function's answer, an error, or raw text (metrics). */
type Written =
  | Answer
  | { kind: 'error'; err: unknown }
  | { kind: 'text'; status: number; contentType: string; body: string };

/** A dispatched request: its metrics label, the reply types it may send, and its answer. */
interface Pending {
  kind: string;
  replies: readonly string[];
  answer: Written | Promise<Written>;
}

/** Fields of the request's log line, also bound to `ctx.log` when a handler asks for it. */
type Bindings = Record<string, unknown>;

/**
 * One request in flight: what its answer and its log line need, and the context its handler
 * sees. One object per request, with the logger made only if the handler asks for it.
 */
class Exchange implements RequestContext {
  readonly bindings: Bindings = {};
  readonly started = performance.now();
  readonly traceparent: string;
  readonly headers: IncomingMessage['headers'];
  #log: Logger | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly root: Logger,
  ) {
    const span = startSpan(req.headers['traceparent']);
    this.bindings['traceId'] = span.traceId;
    this.traceparent = span.traceparent;
    this.headers = req.headers;
  }

  get log(): Logger {
    this.#log ??= this.root.child(this.bindings);
    return this.#log;
  }
}

const emptyBody = Buffer.alloc(0);
const endpoints = new Set(['/health/liveness', '/health/readiness', '/metrics']);
const noReplies: readonly string[] = [];

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function matchRoute(
  route: HttpRoute,
  parts: readonly string[],
): Record<string, string> | undefined {
  if (route.segments.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const want = route.segments[i]!;
    const got = parts[i]!;
    if (want.startsWith(':')) {
      const value = decodeURIComponent(got); // the front server refused broken encodings
      if (value === '' || value.includes('/')) return undefined;
      params[want.slice(1)] = value;
    } else if (want !== got) {
      return undefined;
    }
  }
  return params;
}

function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** A JSON body, decoded by its charset; 415 for another media type. */
function routeBody(body: Buffer, media: MediaType | undefined): unknown {
  if (body.length === 0) return undefined;
  if (media === undefined || !isJsonMedia(media.essence)) {
    throw new UnsupportedMediaTypeError(
      `Content-Type must be application/json (got ${media?.essence ?? 'none'})`,
    );
  }
  return parseJson(decodeText(body, media.charset, 'body'), 'body');
}

/**
 * One function's serving state: built once by `createHandler`, read by every request through
 * the module functions below instead of their closing over one long function's locals.
 */
interface Served {
  readonly definition: FunctionDefinition;
  readonly options: HandlerOptions;
  readonly telemetry: Telemetry;
  readonly eventRoutes: ReadonlyMap<string, EventRoute>;
  /** The consumed types, listed in the 400 for an event of another type. */
  readonly handledTypes: string;
}

/** What a request refused before dispatch is counted and checked as. */
const rejected: Pick<Pending, 'kind' | 'replies'> = { kind: 'rejected', replies: noReplies };

/** GET /health/readiness: every probe within the timeout, 503 naming the ones that failed. */
async function readiness(served: Served): Promise<Written> {
  const results = await Promise.all(
    served.definition.readiness.map(async (probe) => {
      try {
        await withTimeout(probe.check(), served.options.readinessTimeoutMs, probe.name);
        return [probe.name, 'ok'] as const;
      } catch (err) {
        return [probe.name, err instanceof Error ? err.message : String(err)] as const;
      }
    }),
  );
  const ready = results.every(([, state]) => state === 'ok');
  return {
    kind: 'json',
    status: ready ? 200 : 503,
    body: { status: ready ? 'ready' : 'unavailable', checks: Object.fromEntries(results) },
  };
}

/** GET /metrics: the registry in Prometheus' text format. */
async function metrics(served: Served): Promise<Written> {
  const { telemetry } = served;
  const body = await telemetry.registry.metrics();
  return { kind: 'text', status: 200, contentType: telemetry.registry.contentType, body };
}

/** The health and metrics endpoints every function serves, GET only. */
function endpoint(served: Served, method: string, path: string): Written | Promise<Written> {
  if (method !== 'GET') {
    return {
      kind: 'error',
      err: new MethodNotAllowedError(`${method} ${path} is not served`, ['GET']),
    };
  }
  if (path === '/health/readiness') return readiness(served);
  if (path === '/metrics') return metrics(served);
  return { kind: 'json', body: { status: 'alive' } };
}

/**
 * Routes one request, in this order: the endpoints, the Content-Type (400 if unparsable), a
 * CloudEvent on POST, then the HTTP routes. Throws what the request is answered with.
 */
function dispatch(served: Served, exchange: Exchange, path: string): Pending {
  const req: BufferedRequest = exchange.req;
  const method = req.method ?? 'GET';
  if (endpoints.has(path)) {
    return { kind: path, replies: noReplies, answer: endpoint(served, method, path) };
  }
  const body = req.rawBody ?? emptyBody;
  const contentType = header(req.headers['content-type']);
  const media = contentType === undefined ? undefined : parseMediaType(contentType, 'Content-Type');
  if (method === 'POST') {
    const event = decodeEvent(req.headers, body, media);
    if (event !== undefined) return dispatchEvent(served, exchange, event);
  }
  return dispatchRoute(served, exchange, method, path, body, media);
}

/** A CloudEvent: its fields on the log line, then its type's route (400 for another type). */
function dispatchEvent(served: Served, exchange: Exchange, event: IncomingEvent): Pending {
  const { bindings } = exchange;
  bindings['ceId'] = event.id;
  bindings['ceType'] = event.type;
  bindings['ceSource'] = event.source;
  const route = served.eventRoutes.get(event.type);
  if (route === undefined) {
    throw new ValidationError(
      `CloudEvent type ${JSON.stringify(event.type)} is not handled by ${served.definition.name} (handles: ${served.handledTypes})`,
    );
  }
  return { kind: event.type, replies: route.replies, answer: route.run(event, exchange) };
}

/** The first HTTP route matching path and method; else 405 (with Allow), 400 or 404. */
function dispatchRoute(
  served: Served,
  exchange: Exchange,
  method: string,
  path: string,
  body: Buffer,
  media: MediaType | undefined,
): Pending {
  const { definition } = served;
  const parts = path.split('/').slice(1);
  const allowed: string[] = [];
  for (const route of definition.routes) {
    const params = matchRoute(route, parts);
    if (params === undefined) continue;
    if (route.method !== method) {
      allowed.push(route.method);
      continue;
    }
    const kind = `${route.method} ${route.path}`;
    return {
      kind,
      replies: noReplies,
      answer: route.run(
        {
          body: route.raw
            ? { bytes: body, contentType: exchange.req.headers['content-type'] }
            : routeBody(body, media),
          params,
        },
        exchange,
      ),
    };
  }
  const eventsEndpoint = path === '/' && definition.events.length > 0;
  if (eventsEndpoint && method !== 'POST') allowed.push('POST');
  if (allowed.length > 0) {
    throw new MethodNotAllowedError(`${method} ${path} is not served`, allowed);
  }
  if (eventsEndpoint) {
    throw new ValidationError(
      'not a CloudEvent: send ce-specversion/ce-id/ce-source/ce-type headers (binary mode) or Content-Type application/cloudevents+json (structured mode)',
    );
  }
  throw new NotFoundError(`no route for ${method} ${path}`);
}

/** One writeHead per answer: cheaper than a setHeader per header. */
function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: string | Uint8Array | undefined,
): number {
  res.writeHead(status, headers);
  res.end(body);
  return status;
}

/** Writes an answer of any kind with the request's traceparent; returns its status. */
function write(
  served: Served,
  res: ServerResponse,
  written: Written,
  pending: Pick<Pending, 'replies'>,
  traceparent: string,
  path: string,
): number {
  switch (written.kind) {
    case 'reply':
      return writeReply(served, res, written, pending, traceparent, path);
    case 'bytes':
      return send(
        res,
        written.status ?? 200,
        { ...written.headers, traceparent, 'content-type': written.contentType },
        written.body,
      );
    case 'accepted':
      return send(res, 202, { traceparent }, undefined);
    case 'json':
      return send(
        res,
        written.status ?? 200,
        { ...written.headers, traceparent, 'content-type': 'application/json; charset=utf-8' },
        JSON.stringify(written.body),
      );
    case 'text':
      return send(
        res,
        written.status,
        { traceparent, 'content-type': written.contentType },
        written.body,
      );
    case 'error':
      return writeError(served, res, written.err, traceparent, path);
  }
}

/** A reply event in binary mode; a type the route did not declare is a 500 instead. */
function writeReply(
  served: Served,
  res: ServerResponse,
  written: Extract<Written, { kind: 'reply' }>,
  pending: Pick<Pending, 'replies'>,
  traceparent: string,
  path: string,
): number {
  const { definition } = served;
  if (!pending.replies.includes(written.event.type)) {
    const err = new Error(`${definition.name} replied with undeclared type ${written.event.type}`);
    return writeError(served, res, err, traceparent, path);
  }
  const { headers, body } = encodeBinary({
    ...written.event,
    source: written.event.source ?? definition.source,
  });
  headers['traceparent'] = traceparent;
  return send(res, 200, headers, body);
}

/** An error as the project's answer body, or as OIP's `{"error": message}` where asked. */
function writeError(
  served: Served,
  res: ServerResponse,
  err: unknown,
  traceparent: string,
  path: string,
): number {
  const answer = errorAnswer(err);
  // KServe's client reads an error's body only when its Content-Type is exactly this.
  if (served.definition.errorMessageOnly?.(path) === true) {
    return send(
      res,
      answer.status,
      { ...answer.headers, traceparent, 'content-type': 'application/json' },
      JSON.stringify({ error: answer.body.error.message }),
    );
  }
  return send(
    res,
    answer.status,
    { ...answer.headers, traceparent, 'content-type': 'application/json; charset=utf-8' },
    JSON.stringify(answer.body),
  );
}

/** Writes the answer, then the request's metric and its one log line. */
function finish(
  served: Served,
  exchange: Exchange,
  written: Written,
  pending: Pick<Pending, 'kind' | 'replies'>,
): void {
  const { telemetry } = served;
  const { req, res, bindings } = exchange;
  const path = (req.url ?? '/').split('?', 1)[0]!;
  const status = write(served, res, written, pending, exchange.traceparent, path);
  const seconds = (performance.now() - exchange.started) / 1000;
  telemetry.observe(pending.kind, status, seconds);
  const line: Record<string, unknown> = bindings;
  line['method'] = req.method;
  line['path'] = req.url;
  line['status'] = status;
  line['ms'] = Math.round(seconds * 1e4) / 10;
  if (status >= 500 && written.kind === 'error')
    telemetry.log.error({ ...line, err: written.err }, 'request failed');
  else telemetry.log.info(line, 'request');
}

/** Serves one buffered request: dispatch, then finish once its answer is known. */
function serve(served: Served, req: BufferedRequest, res: ServerResponse): void {
  const exchange = new Exchange(req, res, served.telemetry.log);
  const path = (req.url ?? '/').split('?', 1)[0]!;
  let pending: Pending;
  try {
    pending = dispatch(served, exchange, path);
  } catch (err) {
    return finish(served, exchange, { kind: 'error', err }, rejected);
  }
  const { answer } = pending;
  if (answer instanceof Promise) {
    answer.then(
      (written) => finish(served, exchange, written, pending),
      (err: unknown) => finish(served, exchange, { kind: 'error', err }, pending),
    );
  } else {
    finish(served, exchange, answer, pending);
  }
}

/**
 * Builds the handler for one function. `handle` serves a request whose body is in
 * `req.rawBody`; `reject` answers one that failed before that (oversize body, bad encoding).
 */
function createHandler(definition: FunctionDefinition, options: HandlerOptions) {
  const eventRoutes = new Map(definition.events.map((route) => [route.type, route]));
  const served: Served = {
    definition,
    options,
    telemetry: options.telemetry,
    eventRoutes,
    handledTypes: [...eventRoutes.keys()].join(', ') || 'none',
  };
  return {
    /** Serves one request whose body is already buffered. Never throws. */
    handle(req: BufferedRequest, res: ServerResponse): void {
      serve(served, req, res);
    },
    /** Answers a request that failed before dispatch (body too large, unreadable). */
    reject(req: IncomingMessage, res: ServerResponse, err: unknown): void {
      finish(
        served,
        new Exchange(req, res, served.telemetry.log),
        { kind: 'error', err },
        rejected,
      );
    },
  };
}

type Handler = ReturnType<typeof createHandler>;

/** A raw route's JSON body, decoded as every other route's is (charset, 415, 400). */
function decodeJsonBody(bytes: Buffer, contentType: string | undefined): unknown {
  return routeBody(
    bytes,
    contentType === undefined ? undefined : parseMediaType(contentType, 'Content-Type'),
  );
}

export { decodeJsonBody, createHandler };
export type { Handler, HandlerOptions, BufferedRequest };
