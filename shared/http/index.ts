/** Defining and serving a function: declarations, the request handler, the server. */
export { defineFunction, onEvent, onRequest, onRawRequest } from './define.js';
export { decodeJsonBody } from './handler.js';
export { buildServer } from './server.js';
export { createHttpClient, endpoint, CallTimeoutError } from './client.js';
export type { HttpSend, HttpAnswer, HttpCall } from './client.js';
export type {
  Answer,
  FunctionDefinition,
  FunctionFactory,
  ReadinessCheck,
  HttpRoute,
  RawBody,
  RequestContext,
} from './define.js';
