/** The custom resources: zod schemas (validated at the boundary); the CRDs made from them are generate.ts's (npm run crds), kept out of this index so no function loads the YAML writer. */
export {
  jointInferenceServiceSpec,
  jointInferenceServiceStatus,
  modelSpec,
  modelStatus,
  hemNames,
  workerQuality,
  miningModes,
  fallbackPolicies,
  offloadModes,
  restartPolicies,
  task,
  taskKinds,
  boxFormats,
} from './schemas.js';
export type {
  JointInferenceServiceSpec,
  JointInferenceServiceStatus,
  ModelSpec,
  TaskSpec,
  HemName,
  WorkerQuality,
} from './schemas.js';
export { mlGraphSpec, mlGraphStatus, graphProblems, joinTypes } from './mlgraph.js';
export type { MLGraphSpec, GraphNode } from './mlgraph.js';
export {
  federatedLearningJobSpec,
  federatedLearningJobStatus,
  federatedLearningConditionTypes,
  datasetSpec,
  datasetStatus,
  aggregationAlgorithms,
  cleanPolicies,
  modelUpdatePolicies,
  sednaEnv,
  trainingDefaults,
  trainingParameters,
  maxRounds,
  requiredParticipants,
} from './federated.js';
export type {
  FederatedLearningJobSpec,
  FederatedLearningJobStatus,
  DatasetSpec,
  DatasetStatus,
  TrainingParameters,
  Participants,
} from './federated.js';
