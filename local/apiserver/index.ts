/** The development API server (tests and the local stack): see docs/dev-apiserver.md. */
export { createDevApiServer, listenDevApiServer } from './server.js';
export { Store } from './store.js';
export { mergePatch } from './patch.js';
export { parseSelector, matches } from './selector.js';
export { kubeconfig } from './kubeconfig.js';
export { servedTypes } from './types.js';
export type { PrinterColumn, ServedType } from './types.js';
export type { DevApiServer, DevApiServerOptions } from './server.js';
export type { KubeObject, ResourceType } from './store.js';
