/**
 * Serving the models: protocol, inference pool, task adapters, hard-example mining, offload.
 * Only what functions/, bench/, local/ and the tests use from outside; the rest is reached by
 * file.
 */
export { openOnnxModel } from './onnx-runtime.js';
export { createInferencePool } from './pool.js';
export { encodeInferRequest, parseInferResponse } from './protocol.js';
export { createMiner } from './hem.js';
export { createCloudClient } from './cloud-client.js';
export { jointInfer, checkJointSettings, WorkerCounters } from './joint.js';
export { createTaskAdapter } from './task.js';
export { startReporter } from './reporter.js';
export { edgeInferDefinition, cloudInferDefinition } from './definition.js';
export { startEdgeWorker, startCloudWorker } from './workers.js';
export { sharedAnswers } from './event-answers.js';
export { inferenceMetrics } from './metrics.js';
export { createBudget } from './budget.js';
export { watchTask } from './task-reload.js';
export type { OnnxSession } from './onnx-runtime.js';
export type { InferencePool } from './pool.js';
// The miners' names are the CRD's; createMiner takes one.
export type { HemName } from '../crds/index.js';
export type { HardExampleMiner } from './hem.js';
export type { CloudClient } from './cloud-client.js';
export type { JointDeps } from './joint.js';
export type { TaskAdapter, TaskResult } from './task.js';
export type { Tensor, TensorSpec, Signature } from './tensor.js';
