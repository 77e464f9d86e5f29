/** Serving the models: protocol, inference pool, task adapters, hard-example mining, offload. */
export { loadOnnxModel, openOnnxModel } from './onnx-runtime.js';
export { createInferencePool } from './pool.js';
export { loadModelBytes } from './model-source.js';
export {
  parseInferRequest,
  formatInferResponse,
  encodeInferRequest,
  parseInferResponse,
  modelMetadata,
} from './protocol.js';
export { createMiner, hemNames, parseHemParameters, defaultParameters } from './hem.js';
export { minerFromConfig } from './miner-config.js';
export { createCloudClient } from './cloud-client.js';
export { jointInfer, jointTensors, checkJointSettings, WorkerCounters } from './joint.js';
export { createTaskAdapter, argmax } from './task.js';
export { startReporter } from './reporter.js';
export { edgeInferDefinition, cloudInferDefinition } from './definition.js';
export { startEdgeWorker, startCloudWorker } from './workers.js';
export { sharedAnswers } from './event-answers.js';
export type { AnswerOnce } from './event-answers.js';
export { loadServingConfig, loadEdgeConfig } from './config.js';
export type { OnnxModel, OnnxSession } from './onnx-runtime.js';
export type { InferencePool, PoolOptions, Tensors } from './pool.js';
export type { InferRequest } from './protocol.js';
export type { HardExampleMiner, HemName, HemParameters, EdgeOutput } from './hem.js';
export type { CloudClient, CloudClientOptions } from './cloud-client.js';
export type { JointDeps, JointSettings, JointSample } from './joint.js';
export type { TaskAdapter, TaskResult, Detection } from './task.js';
export type { ServedModel } from './definition.js';
export type { ServingConfig } from './config.js';
export type { Tensor, TensorSpec, Signature, Datatype } from './tensor.js';
export { createHardExampleSink } from './sink.js';
export { inferenceMetrics } from './metrics.js';
export { createBudget, quantile } from './budget.js';
export type { Budget, BudgetOptions } from './budget.js';
export { watchTask, minerFromTask } from './task-reload.js';
