/**
 * ASET for the aset-scheduler function: loading the scenario and the trained meta-policy, the
 * shared binding state, the decisions and the function definition. The simulator, the trainer
 * and the benchmarks (research/) import the modules they study directly.
 */
export { createDeployedController } from './aset-controller.js';
export { createBindingStore } from './binding-store.js';
export { readTrainedNetwork } from './network-card.js';
export { loadScenario, scenarioFingerprint } from './scenario.js';
export { createAsetScheduler } from './scheduler.js';
export { loadAsetSchedulerConfig, endpointFrom } from './scheduler-config.js';
export { asetSchedulerDefinition } from './scheduler-definition.js';
export type { AsetScheduler } from './scheduler.js';
