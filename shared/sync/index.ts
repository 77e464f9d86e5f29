/** downstream-sync: versioned, acknowledged task delivery to edge nodes. */
export { operations, taskVersion, taskOf } from './task.js';
export { createTaskStreams } from './streams.js';
export { createTaskConsumer } from './consumer.js';
export {
  createLocalControllerClient,
  localControllerUrl,
  localControllerAnnotation,
} from './local-controller.js';
export { createDownstream } from './downstream.js';
export { downstreamSyncDefinition } from './definition.js';
export { loadSyncConfig } from './config.js';
export type { Operation, Task } from './task.js';
export type { TaskStreams, Offer, Placement, LocalControllerPending } from './streams.js';
export type { TaskConsumer, DeliveredTask, TaskBatch } from './consumer.js';
export type { LocalControllerClient } from './local-controller.js';
export type { Downstream, SyncResult, ResyncResult, NodeDelivery } from './downstream.js';
