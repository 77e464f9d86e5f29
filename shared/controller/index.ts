/** The JointInferenceService controller: desired workers, the pure decision, its adapter. */
export { desiredState, placementNodes } from './desired.js';
export { reconcile, covers } from './reconcile.js';
export { restartDecision } from './restart.js';
export { mergeConditions, conditionTypes } from './conditions.js';
export { applyActions } from './apply.js';
export { createReconciler } from './reconciler.js';
export { kubeObjectData, targetOf } from './source-events.js';
export type { Target } from './source-events.js';
export { labels, annotations, roles, workerName } from './types.js';
export type { Desired, WorkerSettings } from './desired.js';
export type { Action, Observed, ReconcileOptions } from './reconcile.js';
export type { RestartPolicy, RestartDecision } from './restart.js';
export type { Reconciler, ReconcilerOptions, PassReport } from './reconciler.js';
export type { Role, ServiceObject, WorkerStatus } from './types.js';
export { loadControllerConfig } from './config.js';
export type { ControllerConfig } from './config.js';
export { reconcileTickDefinition } from './definition.js';
