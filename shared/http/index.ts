/**
 * Defining and serving a function: declarations, the request handler, the lean `node:http`
 * front and the crash-only process around it. The functions-framework registration
 * (framework.ts) is imported by its own entries (bin/ff/) only, so a container never loads the
 * framework.
 */
export { defineFunction, onEvent, onRequest, onRawRequest } from './define.js';
export { releaseBody } from './body.js';
export { decodeJsonBody } from './handler.js';
export { buildServer } from './server.js';
export { serveFunction } from './lifecycle.js';
export {
  createHttpClient,
  deadlineBook,
  endpoint,
  sinkPost,
  succeeded,
  CallTimeoutError,
} from './client.js';
export type { HttpSend, HttpAnswer, HttpCall } from './client.js';
export type { ServeOptions, Serving } from './lifecycle.js';
export type {
  Answer,
  FunctionDefinition,
  FunctionFactory,
  ReadinessCheck,
  HttpRoute,
  RawBody,
  RequestContext,
} from './define.js';
