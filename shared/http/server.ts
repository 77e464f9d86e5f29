/**
 * The front every function is served by in its container: `node:http` itself, with nothing
 * between the socket and the handler but what this file does: refuse a path with broken
 * percent-encoding, read the body under the configured limit (chunked and compressed bodies
 * included, aligned and after a turn when the function asks), then hand the request to the
 * handler.
 * functions-framework stays the programming model (framework.ts), not the request path.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Telemetry } from '../telemetry/index.js';
import { readBody } from './body.js';
import type { FunctionDefinition } from './define.js';
import { checkedPath, createHandler } from './handler.js';
import type { Handler } from './handler.js';

/**
 * Timeouts for life behind Knative's queue-proxy, a container's only client. queue-proxy
 * forwards through knative/pkg's NewProxyAutoTransport (knative/serving
 * pkg/queue/sharedmain/main.go `buildTransport`; knative/pkg network/transports.go
 * `newHTTPTransport`), a clone of Go's http.DefaultTransport, which keeps an idle keep-alive
 * connection for 90 s (IdleConnTimeout). Node's default of 5 s would close connections the proxy
 * still holds, and a request it sends on one as it closes fails (a 502 for the caller): the
 * server keeps idle connections longer than the proxy does, so the proxy closes them first.
 */
const keepAliveTimeoutMs = 95_000;
/** The head of a request arrives at once from queue-proxy; this bounds a stuck one (Node's default). */
const headersTimeoutMs = 60_000;
/**
 * The whole request, body included: Knative's longest request, max-revision-timeout-seconds
 * (600 s by default, knative.dev config-defaults), so nothing queue-proxy lets run is cut here.
 */
const requestTimeoutMs = 600_000;

interface ServerOptions {
  telemetry: Telemetry;
  bodyLimitBytes: number;
  readinessTimeoutMs: number;
}

/** A server and the handler it serves, for the process around it (lifecycle.ts). */
interface Front {
  readonly server: Server;
  readonly handler: Handler;
}

/**
 * The request listener: checks the path and the body's alignment header, waits for the body's
 * turn when the function asks for one, reads the body under the limit, then serves. A request
 * refused before its body is read closes its connection after the answer, and the unread rest of
 * the body is discarded.
 */
function frontListener(definition: FunctionDefinition, handler: Handler, limit: number) {
  const refuse = (req: IncomingMessage, res: ServerResponse, err: unknown) => {
    res.shouldKeepAlive = false;
    req.resume();
    handler.reject(req, res, err);
  };
  return (req: IncomingMessage, res: ServerResponse): void => {
    let path: string;
    let alignAt: number | undefined;
    let turn: Promise<void> | undefined;
    try {
      path = checkedPath(req.url);
      alignAt = definition.alignBodyAt?.(req.headers);
      turn = definition.bodyTurn?.(req.headers);
    } catch (err) {
      return refuse(req, res, err);
    }
    const read = () =>
      readBody(
        req,
        limit,
        (err, body) => {
          if (err !== undefined) refuse(req, res, err);
          else handler.handle(req, res, body, path);
        },
        alignAt,
      );
    if (turn === undefined) read();
    else turn.then(read, (err: unknown) => refuse(req, res, err));
  };
}

/** The function's server and handler, not yet listening: the caller decides when and where. */
function createFront(definition: FunctionDefinition, options: ServerOptions): Front {
  const handler = createHandler(definition, options);
  const server = createServer(
    {
      keepAliveTimeout: keepAliveTimeoutMs,
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
    },
    frontListener(definition, handler, options.bodyLimitBytes),
  );
  return { server, handler };
}

/** The function's HTTP server, not yet listening. */
function buildServer(definition: FunctionDefinition, options: ServerOptions): Server {
  return createFront(definition, options).server;
}

export { buildServer, createFront };
export type { Front, ServerOptions };
