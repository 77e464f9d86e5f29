/**
 * The request path shared by every function: health and metrics endpoints, CloudEvent decoding
 * and dispatch by type, plain HTTP routes, and one answer contract (docs/writing-a-function.md
 * "Answers"). It takes a request whose body is already read (server.ts, framework.ts) and uses
 * node:http types only.
 *
 * Crash-only at the edge of every request: whatever goes wrong while answering (an answer that
 * does not serialize, a header Node refuses, a body of the wrong type, a client that is gone) is
 * logged with the request's trace id and ends that request — a 500 when nothing was sent yet,
 * a cut connection when the answer had started — and never escapes as an exception or a
 * rejection. Answers leave at the end of the event loop's turn (turn.ts). What escapes from
 * elsewhere (a handler's stray timer or promise) is the process's business (lifecycle.ts),
 * which learns from `inFlight` which requests were being served.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import {
  MethodNotAllowedError,
  NotFoundError,
  UnsupportedMediaTypeError,
  ValidationError,
  errorAnswer,
} from '../errors/index.js';
import type * as CloudEvents from '../events/cloudevents.js';
import type { IncomingEvent, MediaType } from '../events/index.js';
import { decodeText, isJsonMedia, parseJson, parseMediaType } from '../events/media.js';
import type { Logger, Telemetry } from '../telemetry/index.js';
import type {
  Answer,
  EventRoute,
  FunctionDefinition,
  HttpRoute,
  RequestContext,
} from './define.js';
import { startSpan } from './trace.js';
import { createTurnEnd } from './turn.js';
import type { Ended, TurnEnd } from './turn.js';

interface HandlerOptions {
  telemetry: Telemetry;
  readinessTimeoutMs: number;
}

/** What the handler writes: a function's answer, an error, or raw text (metrics). */
type Written =
  | Answer
  | { kind: 'error'; err: unknown }
  | { kind: 'text'; status: number; contentType: string; body: string };

/** A dispatched request: its metrics label, the reply types it may send, and its answer. */
interface Pending {
  kind: string;
  replies: readonly string[];
  answer: Promise<Written>;
}

/**
 * Fields of the request's log line (strings and numbers: written directly, telemetry's
 * `logRequest`), also bound to `ctx.log` when a handler asks for it.
 */
type Bindings = Record<string, string | number | undefined>;

/** What a request's metric and log line say of it. */
interface Outcome {
  status: number;
  written: Written;
  kind: string;
}

/** nginx's "client closed request": logged and counted for a request whose client left first. */
const clientGone = 499;

/**
 * One request in flight: what its answer and its log line need, and the context its handler
 * sees. One object per request, with the logger made only if the handler asks for it.
 */
class Exchange implements RequestContext {
  readonly bindings: Bindings;
  readonly started = performance.now();
  readonly traceparent: string;
  readonly headers: IncomingMessage['headers'];
  /** Whether its answer waits for the end of the turn (send); recorded once it has left. */
  queued = false;
  /** What it is recorded as, kept while its answer waits (finish). */
  outcome: Outcome | undefined;
  #log: Logger | undefined;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    /** The request's path, without its query (the front checked its percent-encoding). */
    readonly path: string,
    private readonly root: Logger,
  ) {
    const span = startSpan(req.headers['traceparent']);
    this.bindings = { traceId: span.traceId };
    this.traceparent = span.traceparent;
    this.headers = req.headers;
  }

  get traceId(): string {
    return this.bindings['traceId'] as string;
  }

  get log(): Logger {
    this.#log ??= this.root.child(this.bindings);
    return this.#log;
  }
}

/** The CloudEvents codec (shared/events/cloudevents.ts: the SDK, with its JSON-schema validator). */
type EventCodec = typeof CloudEvents;

/**
 * The codec, loaded by the first request that may carry an event (`mayCarryEvent`), not at start:
 * loading it is a tenth of a worker's start, and the inference workers' requests are plain HTTP.
 * A function that declares events loads it a second after start (`preloadCodecAfterMs`) all the
 * same, and decodes a sample event of each mode with it (its first decode is ten times the next),
 * so that its first event (a federated trainer's first round, say) waits for neither.
 */
const preloadCodecAfterMs = 1000;

const codec: { loaded: EventCodec | undefined; loading: Promise<EventCodec> | undefined } = {
  loaded: undefined,
  loading: undefined,
};

function loadCodec(): Promise<EventCodec> {
  codec.loading ??= import('../events/cloudevents.js').then((module) => (codec.loaded = module));
  return codec.loading;
}

const eventMedia = /^\s*application\/cloudevents/i;

/**
 * Whether a request may be a CloudEvent: every request that decodeEvent would decode (or refuse)
 * passes, in binary mode (a ce-specversion or ce-id header) or structured (a cloudevents media
 * type); a request that fails it is not one, and needs no codec.
 */
function mayCarryEvent(headers: IncomingMessage['headers']): boolean {
  if (headers['ce-specversion'] !== undefined || headers['ce-id'] !== undefined) return true;
  const type = headers['content-type'];
  return type !== undefined && eventMedia.test(type);
}

const endpoints = new Set(['/health/liveness', '/health/readiness', '/metrics']);
const noReplies: readonly string[] = [];
const jsonUtf8 = 'application/json; charset=utf-8';

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The path of a request URL: everything before its query. */
function pathOf(url: string | undefined): string {
  if (url === undefined) return '/';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The path of `url`, refused (400, in the JSON error format) when its percent-encoding is
 * broken: the routes decode their parameters without looking again.
 */
function checkedPath(url: string | undefined): string {
  const path = pathOf(url);
  if (!path.includes('%')) return path;
  try {
    decodeURIComponent(path);
  } catch {
    throw new ValidationError(`request path ${JSON.stringify(path)} is not valid percent-encoding`);
  }
  return path;
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
      const value = decodeURIComponent(got); // the front refused broken encodings
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
  /** Requests dispatched and not yet answered. */
  readonly inFlight: Set<Exchange>;
  /** Why the process is draining; readiness answers 503 and answers close their connection. */
  draining: string | undefined;
  /** Ends the answers whose heads are set, together at the end of the turn (turn.ts). */
  readonly end: TurnEnd<Exchange>;
}

/** What a request refused before dispatch is counted and checked as. */
const rejected: Pick<Pending, 'kind' | 'replies'> = { kind: 'rejected', replies: noReplies };

/** GET /health/readiness: every probe within the timeout, 503 naming the ones that failed. */
async function readiness(served: Served): Promise<Written> {
  if (served.draining !== undefined) {
    return {
      kind: 'json',
      status: 503,
      body: { status: 'unavailable', checks: { serving: `draining (${served.draining})` } },
    };
  }
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
  const { contentType, body } = await served.telemetry.scrape();
  return { kind: 'text', status: 200, contentType, body };
}

const alive: Promise<Written> = Promise.resolve({ kind: 'json', body: { status: 'alive' } });

/** The health and metrics endpoints every function serves, GET only. */
function endpoint(served: Served, method: string, path: string): Promise<Written> {
  if (method !== 'GET') {
    const err = new MethodNotAllowedError(`${method} ${path} is not served`, ['GET']);
    return Promise.resolve({ kind: 'error', err });
  }
  if (path === '/health/readiness') return readiness(served);
  if (path === '/metrics') return metrics(served);
  return alive;
}

/**
 * Routes one request, in this order: the endpoints, the Content-Type (400 if unparsable), a
 * CloudEvent on POST, then the HTTP routes. Throws what the request is answered with. `events`
 * is the codec when loaded: it is whenever the request may carry an event (serve).
 */
function dispatch(
  served: Served,
  exchange: Exchange,
  body: Buffer,
  events: EventCodec | undefined,
): Pending {
  const { req, path } = exchange;
  const method = req.method ?? 'GET';
  if (endpoints.has(path)) {
    return { kind: path, replies: noReplies, answer: endpoint(served, method, path) };
  }
  const contentType = header(req.headers['content-type']);
  const media = contentType === undefined ? undefined : parseMediaType(contentType, 'Content-Type');
  if (method === 'POST' && events !== undefined) {
    const event = events.decodeEvent(req.headers, body, media);
    if (event !== undefined) return dispatchEvent(served, exchange, event);
  }
  return dispatchRoute(served, exchange, method, body, media);
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
  body: Buffer,
  media: MediaType | undefined,
): Pending {
  const { definition } = served;
  const { path } = exchange;
  const parts = path.split('/').slice(1);
  const allowed: string[] = [];
  for (const route of definition.routes) {
    const params = matchRoute(route, parts);
    if (params === undefined) continue;
    if (route.method !== method) {
      allowed.push(route.method);
      continue;
    }
    const input = {
      body: route.raw
        ? { bytes: body, contentType: exchange.req.headers['content-type'] }
        : routeBody(body, media),
      params,
    };
    return {
      kind: `${route.method} ${route.path}`,
      replies: noReplies,
      answer: route.run(input, exchange),
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

/** The body's length in bytes; a TypeError for what is neither text nor bytes. */
function byteLength(body: unknown): number {
  if (body === undefined) return 0;
  if (typeof body === 'string') return Buffer.byteLength(body);
  if (body instanceof Uint8Array) return body.byteLength;
  throw new TypeError(`an answer's body must be a string or bytes, not ${typeof body}`);
}

/**
 * One writeHead per answer (cheaper than a setHeader per header), with its Content-Length: the
 * answer goes out in one write, not as chunked encoding's three pieces, at the end of the turn
 * (turn.ts). Everything that can refuse the answer runs now. Returns the status.
 */
function send(
  served: Served,
  exchange: Exchange,
  status: number,
  headers: Record<string, string>,
  body: string | Uint8Array | undefined,
): number {
  headers['content-length'] = String(byteLength(body));
  exchange.res.writeHead(status, headers);
  served.end(exchange.res, body, exchange);
  exchange.queued = true;
  return status;
}

/** Writes an answer of any kind with the request's traceparent; returns its status. */
function write(
  served: Served,
  exchange: Exchange,
  written: Written,
  pending: Pick<Pending, 'replies'>,
): number {
  const { traceparent } = exchange;
  switch (written.kind) {
    case 'reply':
      return writeReply(served, exchange, written, pending);
    case 'bytes':
      return send(
        served,
        exchange,
        written.status ?? 200,
        { ...written.headers, traceparent, 'content-type': written.contentType },
        written.body,
      );
    case 'accepted':
      return send(served, exchange, 202, { traceparent }, undefined);
    case 'json': {
      // Serialized before anything is written: a body that does not serialize is a clean 500.
      const body = JSON.stringify(written.body);
      const headers =
        written.headers === undefined
          ? { traceparent, 'content-type': jsonUtf8 }
          : { ...written.headers, traceparent, 'content-type': jsonUtf8 };
      return send(served, exchange, written.status ?? 200, headers, body);
    }
    case 'text':
      return send(
        served,
        exchange,
        written.status,
        { traceparent, 'content-type': written.contentType },
        written.body,
      );
    case 'error':
      return writeError(served, exchange, written.err);
  }
}

/** A reply event in binary mode; a type the route did not declare is a 500 instead. */
function writeReply(
  served: Served,
  exchange: Exchange,
  written: Extract<Written, { kind: 'reply' }>,
  pending: Pick<Pending, 'replies'>,
): number {
  const { definition } = served;
  if (!pending.replies.includes(written.event.type)) {
    const err = new Error(`${definition.name} replied with undeclared type ${written.event.type}`);
    return writeError(served, exchange, err);
  }
  // Loaded: only a request that carried an event declares replies.
  const events = codec.loaded;
  if (events === undefined) {
    return writeError(served, exchange, new Error('CloudEvents codec not loaded for a reply'));
  }
  const { headers, body } = events.encodeBinary({
    ...written.event,
    source: written.event.source ?? definition.source,
  });
  headers['traceparent'] = exchange.traceparent;
  return send(served, exchange, 200, headers, body);
}

/** An error as the project's answer body, or as OIP's `{"error": message}` where asked. */
function writeError(served: Served, exchange: Exchange, err: unknown): number {
  const answer = errorAnswer(err);
  const { traceparent } = exchange;
  // KServe's client reads an error's body only when its Content-Type is exactly this.
  if (served.definition.errorMessageOnly?.(exchange.path) === true) {
    return send(
      served,
      exchange,
      answer.status,
      { ...answer.headers, traceparent, 'content-type': 'application/json' },
      JSON.stringify({ error: answer.body.error.message }),
    );
  }
  return send(
    served,
    exchange,
    answer.status,
    { ...answer.headers, traceparent, 'content-type': jsonUtf8 },
    JSON.stringify(answer.body),
  );
}

const internalError = JSON.stringify(errorAnswer(undefined).body);

/** The `answer failed` error line, with the request's trace id. */
function answerError(served: Served, exchange: Exchange, err: unknown): void {
  safely(() => served.telemetry.log.error({ traceId: exchange.traceId, err }, 'answer failed'));
}

/**
 * Writing the answer threw. Before anything was sent: a plain 500. After (the head is out, the
 * body is not): the connection is cut, so the client sees a broken answer, never a wrong one.
 */
function answerFailed(served: Served, exchange: Exchange, err: unknown): number {
  const { res } = exchange;
  answerError(served, exchange, err);
  if (!res.headersSent) {
    try {
      return send(
        served,
        exchange,
        500,
        { traceparent: exchange.traceparent, 'content-type': jsonUtf8 },
        internalError,
      );
    } catch {
      // Not even that could be written: cut the connection below.
    }
  }
  res.destroy();
  return 500;
}

/** An answer larger than the socket took at once: logged by cutShort if it ends cut short. */
function watchLongAnswer(served: Served, exchange: Exchange, socket: Socket | null): void {
  exchange.res.once('close', () => cutShort(served, exchange, socket));
}

/**
 * A long answer ended with its connection: when the socket failed (the client reset it, or left
 * and the next write broke), the client left mid-answer.
 */
function cutShort(served: Served, exchange: Exchange, socket: Socket | null): void {
  const err = socket?.errored;
  if (err === null || err === undefined) return;
  const code = (err as { code?: unknown }).code;
  safely(() =>
    served.telemetry.log.warn(
      { traceId: exchange.traceId, path: exchange.req.url, code },
      'client gone before the whole answer was sent',
    ),
  );
}

/**
 * Writes the answer, then the request's metric and its one log line: now when nothing is sent,
 * else once the answer has left at the end of the turn (`left`). Never throws.
 */
function finish(
  served: Served,
  exchange: Exchange,
  written: Written,
  pending: Pick<Pending, 'kind' | 'replies'>,
): void {
  served.inFlight.delete(exchange);
  const { res } = exchange;
  let status = clientGone;
  if (!res.destroyed) {
    if (served.draining !== undefined) res.shouldKeepAlive = false;
    try {
      status = write(served, exchange, written, pending);
    } catch (err) {
      status = answerFailed(served, exchange, err);
    }
  }
  const outcome = { status, written, kind: pending.kind };
  if (exchange.queued) exchange.outcome = outcome;
  // A log line that fails (a binding that does not serialize) has nothing left to tell it to.
  else safely(() => record(served, exchange, outcome));
}

/** An answer queued by `send` has ended (turn.ts): watched if still being written, recorded. */
function left(served: Served, exchange: Exchange, how: Ended): void {
  const { outcome } = exchange;
  if (outcome === undefined) return;
  exchange.outcome = undefined;
  if (how.kind === 'gone') outcome.status = clientGone;
  if (how.kind === 'failed') {
    answerError(served, exchange, how.err);
    outcome.status = 500;
  }
  if (how.kind === 'sent' && !exchange.res.writableFinished) {
    watchLongAnswer(served, exchange, exchange.res.socket);
  }
  safely(() => record(served, exchange, outcome));
}

/** Runs `work`, which only reports: a failure to report must not become a second failure. */
function safely(work: () => void): void {
  try {
    work();
  } catch {
    // Nothing left to report it to.
  }
}

/** The request's metric and its one log line. */
function record(served: Served, exchange: Exchange, { status, written, kind }: Outcome): void {
  const { telemetry } = served;
  const seconds = (performance.now() - exchange.started) / 1000;
  telemetry.observe(kind, status, seconds);
  const line = exchange.bindings;
  line['method'] = exchange.req.method;
  line['path'] = exchange.req.url;
  line['status'] = status;
  line['ms'] = Math.round(seconds * 1e4) / 10;
  if (status >= 500 && written.kind === 'error') {
    telemetry.log.error({ ...line, err: written.err }, 'request failed');
  } else if (status === clientGone) {
    telemetry.log.warn(line, 'client gone before the answer');
  } else {
    telemetry.logRequest(line);
  }
}

/**
 * Serves one request whose body is read: the CloudEvents codec first when the request may carry
 * an event and the codec is not loaded yet, then `run`.
 */
function serve(
  served: Served,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
  path: string,
): void {
  const exchange = new Exchange(req, res, path, served.telemetry.log);
  served.inFlight.add(exchange);
  if (codec.loaded === undefined && req.method === 'POST' && mayCarryEvent(req.headers)) {
    loadCodec().then(
      (events) => run(served, exchange, body, events),
      (err: unknown) => finish(served, exchange, { kind: 'error', err }, rejected),
    );
    return;
  }
  run(served, exchange, body, codec.loaded);
}

/** Dispatches a request in flight, then finishes it once its answer is known. */
function run(
  served: Served,
  exchange: Exchange,
  body: Buffer,
  events: EventCodec | undefined,
): void {
  let pending: Pending;
  try {
    pending = dispatch(served, exchange, body, events);
  } catch (err) {
    return finish(served, exchange, { kind: 'error', err }, rejected);
  }
  // Promise.resolve: a handler written in plain JavaScript may return something else.
  Promise.resolve(pending.answer).then(
    (written) => finish(served, exchange, written, pending),
    (err: unknown) => finish(served, exchange, { kind: 'error', err }, pending),
  );
}

/**
 * Builds the handler for one function: `handle` serves a request whose body is read,
 * `reject` answers one that failed before that (oversize body, bad encoding).
 */
function createHandler(definition: FunctionDefinition, options: HandlerOptions) {
  const eventRoutes = new Map(definition.events.map((route) => [route.type, route]));
  if (eventRoutes.size > 0) {
    const preload = () =>
      void loadCodec()
        .then((loaded) => loaded.warmUp())
        .catch(() => undefined);
    setTimeout(preload, preloadCodecAfterMs).unref();
  }
  const served: Served = {
    definition,
    options,
    telemetry: options.telemetry,
    eventRoutes,
    handledTypes: [...eventRoutes.keys()].join(', ') || 'none',
    inFlight: new Set(),
    draining: undefined,
    end: createTurnEnd<Exchange>((exchange, how) => left(served, exchange, how)),
  };
  return {
    /** Serves one request; `path` is its URL's path, percent-encoding checked. Never throws. */
    handle(req: IncomingMessage, res: ServerResponse, body: Buffer, path: string): void {
      serve(served, req, res, body, path);
    },
    /** Answers a request that failed before dispatch (body too large, unreadable). */
    reject(req: IncomingMessage, res: ServerResponse, err: unknown): void {
      const exchange = new Exchange(req, res, pathOf(req.url), served.telemetry.log);
      finish(served, exchange, { kind: 'error', err }, rejected);
    },
    /** The trace ids of the requests dispatched and not yet answered. */
    inFlight(): string[] {
      return [...served.inFlight].map((exchange) => exchange.traceId);
    },
    /**
     * From now on readiness answers 503 naming `reason`, and every answer, those in flight
     * included, closes its connection (`Connection: close`).
     */
    drain(reason: string): void {
      served.draining ??= reason;
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

export { decodeJsonBody, createHandler, checkedPath, safely };
export type { Handler, HandlerOptions };
