/**
 * The only file that imports functions-framework, the programming model a function keeps: it
 * registers a function as a functions-framework HTTP function (a `cloudEvent` function cannot
 * answer with a reply event), so that the stock CLI serves it unchanged:
 *
 *   npx functions-framework --target=<name> --source=dist/bin/ff/<name>.js
 *
 * Under the CLI the framework's Express app owns the request path: its body parsers run before
 * the handler (up to 1 GB, and a JSON body must be an object or an array: a bare JSON scalar is
 * its 400), and the handler decodes the raw bytes they kept (`req.rawBody`). A body no parser
 * read (no Content-Type) is read here, under the configured limit. The container serves through
 * server.ts instead, with no framework in the request path.
 */
import { http } from '@google-cloud/functions-framework';
import type { IncomingMessage } from 'node:http';
import { readBody } from './body.js';
import type { FunctionDefinition } from './define.js';
import { checkedPath, createHandler } from './handler.js';
import type { Handler, HandlerOptions } from './handler.js';

interface FrameworkOptions extends HandlerOptions {
  bodyLimitBytes: number;
}

/** What the framework's parsers leave on a request. */
type ParsedRequest = IncomingMessage & { rawBody?: Buffer };

/**
 * Registers `definition` with functions-framework under its name; the returned handler is the
 * one every request of the framework's server goes to.
 */
function registerFunction(definition: FunctionDefinition, options: FrameworkOptions): Handler {
  const handler = createHandler(definition, options);
  http(definition.name, (req: ParsedRequest, res) => {
    let path: string;
    try {
      path = checkedPath(req.url);
    } catch (err) {
      return handler.reject(req, res, err);
    }
    if (req.rawBody !== undefined) return handler.handle(req, res, req.rawBody, path);
    if (req.readableEnded) return handler.handle(req, res, Buffer.alloc(0), path);
    readBody(req, options.bodyLimitBytes, (err, body) => {
      if (err === undefined) return handler.handle(req, res, body, path);
      res.shouldKeepAlive = false;
      req.resume();
      handler.reject(req, res, err);
    });
  });
  return handler;
}

export { registerFunction };
export type { FrameworkOptions };
