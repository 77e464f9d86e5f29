/**
 * How a function is declared: the CloudEvent types it consumes (each with a data schema and the
 * reply types it may send) and the plain HTTP routes it serves. Declaring replies up front lets
 * `defineFunction` refuse a function that would answer an event with a type it also consumes —
 * through the Broker that is an infinite loop.
 */
import type { z } from 'zod';
import type { RuntimeConfig } from '../config/index.js';
import type { IncomingEvent, OutgoingEvent } from '../events/index.js';
import type { Logger, Telemetry } from '../telemetry/index.js';
import { parseInput } from '../schema/index.js';

/** What a handler answers. */
type Answer =
  /** 200 with a binary-mode CloudEvent that the Broker re-ingests. */
  | { kind: 'reply'; event: Omit<OutgoingEvent, 'source'> & { source?: string } }
  /** 202: accepted, nothing to reply. */
  | { kind: 'accepted' }
  /** A plain HTTP answer with a JSON body (HTTP routes). */
  | { kind: 'json'; status?: number; body: unknown; headers?: Readonly<Record<string, string>> }
  /** A plain HTTP answer with a binary body (e.g. OIP's binary tensor extension). */
  | {
      kind: 'bytes';
      status?: number;
      contentType: string;
      body: Uint8Array;
      headers?: Readonly<Record<string, string>>;
    };

/** Per-request facts a handler may use: its log line's logger and the trace to propagate. */
interface RequestContext {
  readonly log: Logger;
  /** W3C traceparent for this request's span: pass it on outgoing calls. */
  traceparent: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

/** A consumed CloudEvent type, type-erased once its data schema is bound. */
interface EventRoute {
  readonly type: string;
  readonly replies: readonly string[];
  run(event: IncomingEvent, ctx: RequestContext): Promise<Answer>;
}

/** A plain HTTP route, type-erased once its schemas are bound. */
interface HttpRoute {
  readonly method: HttpMethod;
  readonly path: string;
  readonly segments: readonly string[];
  /** The body reaches `run` as the raw bytes with its content type, not decoded as JSON. */
  readonly raw: boolean;
  run(
    request: { body: unknown; params: Record<string, string> },
    ctx: RequestContext,
  ): Promise<Answer>;
}

/** A raw route's body: the bytes as received and the request's media type. */
interface RawBody {
  bytes: Buffer;
  contentType: string | undefined;
}

/** A dependency the function needs; readiness fails (503) while `check` rejects. */
interface ReadinessCheck {
  name: string;
  check(): Promise<void>;
}

interface FunctionDefinition {
  readonly name: string;
  /** CloudEvent `source` of this function's replies. */
  readonly source: string;
  readonly events: readonly EventRoute[];
  readonly routes: readonly HttpRoute[];
  readonly readiness: readonly ReadinessCheck[];
  readonly alignBodyAt?: AlignBodyAt;
  readonly bodyTurn?: BodyTurn;
  /**
   * Paths whose errors answer `{"error": "<message>"}`, as the Open Inference Protocol requires,
   * instead of the project's `{"error": {status, reason, message}}`.
   */
  readonly errorMessageOnly?: (path: string) => boolean;
}

/**
 * What every `functions/<name>/index.ts` default-exports: given the process's runtime settings
 * and telemetry, the function's definition to serve and how to release what it holds.
 */
type FunctionFactory = (runtime: { config: RuntimeConfig; telemetry: Telemetry }) => Promise<{
  definition: FunctionDefinition;
  close(): Promise<void>;
}>;

/**
 * For requests whose body carries binary numbers at a known offset (OIP's binary tensor
 * extension): the offset, from the request's headers. Such a body is read with that offset
 * 8-byte aligned, so the numbers are used in place as a typed array instead of being copied
 * into one. `undefined`: an ordinary body.
 */
type AlignBodyAt = (
  headers: Readonly<Record<string, string | string[] | undefined>>,
) => number | undefined;

/**
 * For requests whose body should be read after other work: what to wait for first, from the
 * request's headers (`undefined`: read it at once). The socket is not read meanwhile, so the
 * rest of the body waits in the kernel's buffers and TCP holds its sender back; the thread
 * serves the requests that arrive meanwhile first. The inference workers make each large body
 * wait for its turn (shared/inference/turns.ts). It must not reject.
 */
type BodyTurn = (
  headers: Readonly<Record<string, string | string[] | undefined>>,
) => Promise<void> | undefined;

type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** Binds a CloudEvent type to a data schema and a handler that receives parsed data. */
function onEvent<S extends z.ZodType>(spec: {
  type: string;
  data: S;
  replies?: readonly string[];
  handle(input: { data: z.output<S>; event: IncomingEvent }, ctx: RequestContext): Promise<Answer>;
}): EventRoute {
  return {
    type: spec.type,
    replies: spec.replies ?? [],
    run: (event, ctx) =>
      spec.handle({ data: parseInput(spec.data, event.data, 'data'), event }, ctx),
  };
}

/** The parts every route shares: its path split once, and its path parameters checked. */
function routeBase<P extends z.ZodType>(spec: { method: HttpMethod; path: string; params?: P }) {
  if (!spec.path.startsWith('/')) throw new Error(`route path must start with "/": ${spec.path}`);
  return {
    method: spec.method,
    path: spec.path,
    segments: spec.path.split('/').slice(1),
    params: (raw: Record<string, string>) =>
      (spec.params === undefined ? raw : parseInput(spec.params, raw, 'path')) as z.output<P>,
  };
}

/**
 * Binds `METHOD /path/:param` to a handler. `params` and `body` schemas validate the path
 * segments and the JSON body; a route without `body` takes none.
 */
function onRequest<P extends z.ZodType, B extends z.ZodType>(spec: {
  method: HttpMethod;
  path: string;
  params?: P;
  body?: B;
  handle(input: { params: z.output<P>; body: z.output<B> }, ctx: RequestContext): Promise<Answer>;
}): HttpRoute {
  const { params, ...route } = routeBase(spec);
  return {
    ...route,
    raw: false,
    run: (request, ctx) =>
      spec.handle(
        {
          params: params(request.params),
          body: (spec.body === undefined
            ? undefined
            : parseInput(spec.body, request.body, 'body')) as z.output<B>,
        },
        ctx,
      ),
  };
}

/**
 * Binds `METHOD /path/:param` to a handler that reads the body itself (binary protocols, such
 * as the inference protocol's binary tensor extension); `decodeJsonBody` decodes a JSON one.
 */
function onRawRequest<P extends z.ZodType>(spec: {
  method: HttpMethod;
  path: string;
  params?: P;
  handle(input: { params: z.output<P>; body: RawBody }, ctx: RequestContext): Promise<Answer>;
}): HttpRoute {
  const { params, ...route } = routeBase(spec);
  return {
    ...route,
    raw: true,
    run: (request, ctx) =>
      spec.handle({ params: params(request.params), body: request.body as RawBody }, ctx),
  };
}

/** Checks the declaration once, at start-up: no loops, no ambiguous types or routes. */
function defineFunction(definition: {
  name: string;
  source?: string;
  events?: readonly EventRoute[];
  routes?: readonly HttpRoute[];
  readiness?: readonly ReadinessCheck[];
  alignBodyAt?: AlignBodyAt;
  bodyTurn?: BodyTurn;
  errorMessageOnly?: (path: string) => boolean;
}): FunctionDefinition {
  const events = definition.events ?? [];
  const consumed = new Set<string>();
  for (const route of events) {
    if (consumed.has(route.type)) throw new Error(`event type ${route.type} handled twice`);
    consumed.add(route.type);
  }
  for (const route of events) {
    const loop = route.replies.find((type) => consumed.has(type));
    if (loop !== undefined) {
      throw new Error(`${definition.name} would reply ${loop}, a type it consumes: a Broker loop`);
    }
  }
  const routes = definition.routes ?? [];
  const seen = new Set<string>();
  for (const route of routes) {
    const key = `${route.method} ${route.path}`;
    if (seen.has(key)) throw new Error(`route ${key} declared twice`);
    seen.add(key);
  }
  return Object.freeze({
    name: definition.name,
    source: definition.source ?? `/apis/edgeai.io/functions/${definition.name}`,
    events,
    routes,
    readiness: definition.readiness ?? [],
    ...(definition.alignBodyAt === undefined ? {} : { alignBodyAt: definition.alignBodyAt }),
    ...(definition.bodyTurn === undefined ? {} : { bodyTurn: definition.bodyTurn }),
    ...(definition.errorMessageOnly === undefined
      ? {}
      : { errorMessageOnly: definition.errorMessageOnly }),
  });
}

export { defineFunction, onEvent, onRequest, onRawRequest };
export type {
  Answer,
  EventRoute,
  FunctionDefinition,
  FunctionFactory,
  HttpMethod,
  HttpRoute,
  RawBody,
  ReadinessCheck,
  RequestContext,
  AlignBodyAt,
  BodyTurn,
};
