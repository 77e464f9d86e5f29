/** Kubernetes access: the kinds the control plane uses and the client-node adapter. */
export { kinds, apiVersion } from './kinds.js';
export { loadKubeConfig, createKube, createKubeWatch } from './client.js';
export { inform } from './informer.js';
export { meteredKube } from './metered.js';
export { findObject } from './find.js';
export type { KindName } from './kinds.js';
export type { Kube, KubeObject, KubeWatch, WatchEventType } from './client.js';
export type { Informer } from './informer.js';
export type { Verb } from './metered.js';
