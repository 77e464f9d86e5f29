/** The custom resources: zod schemas (validated at the boundary) and the CRDs made from them. */
export {
  jointInferenceServiceSpec,
  jointInferenceServiceStatus,
  modelSpec,
  modelStatus,
  hemNames,
  miningModes,
  fallbackPolicies,
  offloadModes,
  restartPolicies,
  task,
  taskKinds,
  boxFormats,
} from './schemas.js';
export { customResourceDefinitions, renderCustomResourceDefinitions } from './generate.js';
export type {
  JointInferenceServiceSpec,
  JointInferenceServiceStatus,
  ModelSpec,
  TaskSpec,
} from './schemas.js';
