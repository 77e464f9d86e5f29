/**
 * The only file that imports functions-framework. A function is registered as a
 * functions-framework HTTP function (a `cloudEvent` function cannot answer with a reply event),
 * and its server is functions-framework's own Express server with one change in front: the body
 * is read here, under the configured limit, before Express sees the request. The framework's
 * parsers would buffer up to 1 GB and reject JSON scalars such as `"hello"`, a valid event body;
 * they skip a request whose body was already consumed.
 */
import type { Server } from 'node:http';
import { http } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import { ValidationError } from '../errors/index.js';
import type { Telemetry } from '../telemetry/index.js';
import { readBody } from './body.js';
import type { FunctionDefinition } from './define.js';
import { createHandler } from './handler.js';
import type { BufferedRequest } from './handler.js';

/**
 * Express's router answers a path with broken percent-encoding with an HTML page carrying a
 * stack trace; refuse such paths here, in the JSON error format.
 */
function checkPath(url: string | undefined): string {
  const path = (url ?? '/').split('?', 1)[0] ?? '/';
  try {
    decodeURIComponent(path);
  } catch {
    throw new ValidationError(`request path ${JSON.stringify(path)} is not valid percent-encoding`);
  }
  return path;
}

/** Paths the framework answers itself with an empty 404; ours get the JSON error format. */
const frameworkIgnored = new Set(['/favicon.ico', '/robots.txt']);

interface ServerOptions {
  telemetry: Telemetry;
  bodyLimitBytes: number;
  readinessTimeoutMs: number;
}

/**
 * Registers the function with functions-framework and returns its HTTP server, not yet
 * listening: the caller decides when and where to listen.
 */
function buildServer(definition: FunctionDefinition, options: ServerOptions): Server {
  const handler = createHandler(definition, options);
  http(definition.name, (req, res) => handler.handle(req, res));
  const server = getTestServer(definition.name);
  const [app] = server.listeners('request') as Array<(req: BufferedRequest, res: unknown) => void>;
  if (app === undefined) throw new Error('functions-framework server has no request listener');
  server.removeAllListeners('request');
  server.on('request', (req: BufferedRequest, res) => {
    const refuse = (err: unknown) => {
      // The unread rest of the body is discarded and the connection closed after the answer.
      res.shouldKeepAlive = false;
      req.resume();
      handler.reject(req, res, err);
    };
    let path: string;
    try {
      path = checkPath(req.url);
    } catch (err) {
      return refuse(err);
    }
    let alignAt: number | undefined;
    try {
      alignAt = definition.alignBodyAt?.(req.headers);
    } catch (err) {
      return refuse(err);
    }
    readBody(
      req,
      options.bodyLimitBytes,
      (err, body) => {
        if (err !== undefined) return refuse(err);
        req.rawBody = body;
        if (frameworkIgnored.has(path)) handler.handle(req, res);
        else app(req, res);
      },
      alignAt,
    );
  });
  return server;
}

export { buildServer };
export type { ServerOptions };
