/**
 * The JointInferenceService and MLGraph controllers: desired Services, the pure decisions, their
 * adapters.
 */
export { placementNodes } from './desired.js';
export { covers } from './reconcile.js';
export { createReconciler } from './reconciler.js';
export { createGraphReconciler } from './graph-reconciler.js';
export type { GraphReconciler } from './graph-reconciler.js';
export { kubeObjectData } from './source-events.js';
export type { Reconciler, PassReport } from './reconciler.js';
export type { ServiceObject } from './types.js';
export { loadControllerConfig } from './config.js';
export { reconcileTickDefinition } from './definition.js';
