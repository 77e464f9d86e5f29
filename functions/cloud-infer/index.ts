/** cloud-infer: the big model behind the Open Inference Protocol (see shared/inference). */
import type { FunctionFactory } from '../../bin/serve.js';
import {
  cloudInferDefinition,
  createInferencePool,
  loadModelBytes,
  loadServingConfig,
} from '../../shared/inference/index.js';

const factory: FunctionFactory = async () => {
  const serving = loadServingConfig('cloud');
  const pool = await createInferencePool({
    model: await loadModelBytes(serving.model),
    ...serving.pool,
  });
  const definition = cloudInferDefinition({
    model: { name: serving.modelName, version: '1' },
    pool,
    maxBatch: serving.maxBatch,
    readiness: [],
  });
  return { definition, close: () => pool.close() };
};

export default factory;
