/**
 * The request path shared by every function: health and metrics endpoints, CloudEvent decoding
 * and dispatch by type, plain HTTP routes, and one answer contract (see README "Answers").
 * It uses node:http types only, so it runs the same under functions-framework's Express app.
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
import { isJsonMedia, parseJson, decodeText } from '../events/media.js';
import type { Telemetry } from '../telemetry/index.js';
import type { Answer, FunctionDefinition, HttpRoute, RequestContext } from './define.js';
import { startSpan } from './trace.js';

interface HandlerOptions {
  telemetry: Telemetry;
  readinessTimeoutMs: number;
}

/** A request whose body the front server has already read (see server.ts). */
type BufferedRequest = IncomingMessage & { rawBody?: Buffer };

interface Outcome {
  kind: string;
  answer:
    | Answer
    | { kind: 'error'; err: unknown }
    | { kind: 'text'; status: number; contentType: string; body: string };
  event?: IncomingEvent;
}

const emptyBody = Buffer.alloc(0);

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
      let value: string;
      try {
        value = decodeURIComponent(got);
      } catch {
        throw new ValidationError(
          `path segment ${JSON.stringify(got)} is not valid percent-encoding`,
        );
      }
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

/**
 * Builds the handler for one function. `handle` serves a request whose body is in
 * `req.rawBody`; `reject` answers one that failed before that (oversize body, bad encoding).
 */
function createHandler(definition: FunctionDefinition, options: HandlerOptions) {
  const { telemetry } = options;
  const eventRoutes = new Map(definition.events.map((route) => [route.type, route]));
  const handledTypes = [...eventRoutes.keys()].join(', ') || 'none';

  async function readiness(): Promise<Outcome['answer']> {
    const results = await Promise.all(
      definition.readiness.map(async (probe) => {
        try {
          await withTimeout(probe.check(), options.readinessTimeoutMs, probe.name);
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

  async function endpoint(method: string, path: string): Promise<Outcome | undefined> {
    const known =
      path === '/health/liveness' || path === '/health/readiness' || path === '/metrics';
    if (!known) return undefined;
    if (method !== 'GET') {
      return {
        kind: path,
        answer: {
          kind: 'error',
          err: new MethodNotAllowedError(`${method} ${path} is not served`, ['GET']),
        },
      };
    }
    if (path === '/health/liveness') {
      return { kind: path, answer: { kind: 'json', body: { status: 'alive' } } };
    }
    if (path === '/health/readiness') return { kind: path, answer: await readiness() };
    return {
      kind: path,
      answer: {
        kind: 'text',
        status: 200,
        contentType: telemetry.registry.contentType,
        body: await telemetry.registry.metrics(),
      },
    };
  }

  async function dispatchEvent(event: IncomingEvent, ctx: RequestContext): Promise<Answer> {
    const route = eventRoutes.get(event.type);
    if (route === undefined) {
      throw new ValidationError(
        `CloudEvent type ${JSON.stringify(event.type)} is not handled by ${definition.name} (handles: ${handledTypes})`,
      );
    }
    const answer = await route.run(event, ctx);
    if (answer.kind === 'reply' && !route.replies.includes(answer.event.type)) {
      throw new Error(
        `${definition.name} replied undeclared type ${answer.event.type} to ${event.type}`,
      );
    }
    return answer;
  }

  function routeBody(body: Buffer, media: MediaType | undefined): unknown {
    if (body.length === 0) return undefined;
    if (media === undefined || !isJsonMedia(media.essence)) {
      throw new UnsupportedMediaTypeError(
        `Content-Type must be application/json (got ${media?.essence ?? 'none'})`,
      );
    }
    return parseJson(decodeText(body, media.charset, 'body'), 'body');
  }

  async function dispatch(
    req: BufferedRequest,
    path: string,
    ctx: RequestContext,
  ): Promise<Outcome> {
    const method = req.method ?? 'GET';
    const special = await endpoint(method, path);
    if (special !== undefined) return special;
    const body = req.rawBody ?? emptyBody;
    const contentType = header(req.headers['content-type']);
    const media =
      contentType === undefined ? undefined : parseMediaType(contentType, 'Content-Type');
    if (method === 'POST') {
      const event = decodeEvent(req.headers, body, media);
      if (event !== undefined) {
        ctx.log = ctx.log.child({ ceId: event.id, ceType: event.type });
        return { kind: event.type, event, answer: await dispatchEvent(event, ctx) };
      }
    }
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
      return { kind, answer: await route.run({ body: routeBody(body, media), params }, ctx) };
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

  function write(res: ServerResponse, outcome: Outcome['answer'], traceparent: string): number {
    res.setHeader('traceparent', traceparent);
    switch (outcome.kind) {
      case 'reply': {
        const { headers, body } = encodeBinary({
          ...outcome.event,
          source: outcome.event.source ?? definition.source,
        });
        for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
        res.statusCode = 200;
        res.end(body);
        return 200;
      }
      case 'accepted':
        res.statusCode = 202;
        res.end();
        return 202;
      case 'json': {
        for (const [name, value] of Object.entries(outcome.headers ?? {}))
          res.setHeader(name, value);
        res.statusCode = outcome.status ?? 200;
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(outcome.body));
        return res.statusCode;
      }
      case 'text':
        res.statusCode = outcome.status;
        res.setHeader('content-type', outcome.contentType);
        res.end(outcome.body);
        return outcome.status;
      case 'error': {
        const answer = errorAnswer(outcome.err);
        for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
        res.statusCode = answer.status;
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end(JSON.stringify(answer.body));
        return answer.status;
      }
    }
  }

  function finish(
    req: IncomingMessage,
    res: ServerResponse,
    outcome: Outcome,
    ctx: RequestContext,
    started: number,
  ): void {
    const status = write(res, outcome.answer, ctx.traceparent);
    const seconds = (performance.now() - started) / 1000;
    telemetry.observe(outcome.kind, status, seconds);
    const line = { method: req.method, path: req.url, status, ms: Math.round(seconds * 1e4) / 10 };
    if (status >= 500 && outcome.answer.kind === 'error') {
      ctx.log.error({ ...line, err: outcome.answer.err }, 'request failed');
    } else {
      ctx.log.info(line, 'request');
    }
  }

  function context(req: IncomingMessage): RequestContext {
    const span = startSpan(req.headers['traceparent']);
    return {
      log: telemetry.log.child({ traceId: span.traceId }),
      traceparent: span.traceparent,
      headers: req.headers,
    };
  }

  return {
    /** Serves one request whose body is already buffered. Never rejects. */
    async handle(req: BufferedRequest, res: ServerResponse): Promise<void> {
      const started = performance.now();
      const ctx = context(req);
      const path = (req.url ?? '/').split('?', 1)[0]!;
      let outcome: Outcome;
      try {
        outcome = await dispatch(req, path, ctx);
      } catch (err) {
        outcome = { kind: 'rejected', answer: { kind: 'error', err } };
      }
      finish(req, res, outcome, ctx, started);
    },
    /** Answers a request that failed before dispatch (body too large, unreadable). */
    reject(req: IncomingMessage, res: ServerResponse, err: unknown): void {
      finish(
        req,
        res,
        { kind: 'rejected', answer: { kind: 'error', err } },
        context(req),
        performance.now(),
      );
    },
  };
}

type Handler = ReturnType<typeof createHandler>;

export { createHandler };
export type { Handler, HandlerOptions, BufferedRequest };
