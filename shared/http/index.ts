/** Defining and serving a function: declarations, the request handler, the server. */
export { defineFunction, onEvent, onRequest, onRawRequest } from './define.js';
export { decodeJsonBody } from './handler.js';
export { buildServer } from './server.js';
export type {
  Answer,
  FunctionDefinition,
  ReadinessCheck,
  RequestContext,
  HttpMethod,
  HttpRoute,
  RawBody,
} from './define.js';
export type { ServerOptions } from './server.js';
