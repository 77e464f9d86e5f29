/**
 * The control plane: one reconcile engine (engine.ts) and the kinds registered with it
 * (joint-inference.ts, ml-graph.ts, federated.ts), each a desired state and a pure decision.
 */
export { placementNodes } from './desired.js';
export { covers } from './drift.js';
export { createController } from './engine.js';
export type { Controller, PassReport, TickReport } from './engine.js';
export { jointInferenceKind } from './joint-inference.js';
export { mlGraphKind } from './ml-graph.js';
export { federatedKind } from './federated.js';
export type { FederatedProgress } from './federated.js';
export { kubeObjectData } from './source-events.js';
export type { ServiceObject } from './types.js';
export { loadControllerConfig } from './config.js';
export { reconcileTickDefinition } from './definition.js';
