/** Kubernetes access: the kinds the control plane uses and the client-node adapter. */
export { kinds, apiVersion } from './kinds.js';
export { loadKubeConfig, createKube } from './client.js';
export { meteredKube } from './metered.js';
export { findObject } from './find.js';
export type { Kind, KindName } from './kinds.js';
export type { Kube, KubeObject, ObjectRef } from './client.js';
export type { Verb } from './metered.js';
