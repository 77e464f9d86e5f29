/** Defining and serving a function: declarations, the request handler, the server. */
export { defineFunction, onEvent, onRequest } from './define.js';
export { buildServer } from './server.js';
export type {
  Answer,
  FunctionDefinition,
  ReadinessCheck,
  RequestContext,
  HttpMethod,
} from './define.js';
export type { ServerOptions } from './server.js';
