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
import type { Telemetry } from '../telemetry/index.js';
import { readBody } from './body.js';
import type { FunctionDefinition } from './define.js';
import { createHandler } from './handler.js';
import type { BufferedRequest } from './handler.js';

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
    readBody(req, options.bodyLimitBytes).then(
      (body) => {
        req.rawBody = body;
        app(req, res);
      },
      (err: unknown) => {
        // The unread rest of the body is discarded and the connection closed after the answer.
        res.shouldKeepAlive = false;
        req.resume();
        handler.reject(req, res, err);
      },
    );
  });
  return server;
}

export { buildServer };
export type { ServerOptions };
