/** cloud-infer: the big model behind the Open Inference Protocol (see shared/inference). */
import type { FunctionFactory } from '../../bin/serve.js';
import {
  cloudInferDefinition,
  createInferencePool,
  inferenceMetrics,
  loadModelBytes,
  loadServingConfig,
} from '../../shared/inference/index.js';
import type { InferencePool } from '../../shared/inference/index.js';

const factory: FunctionFactory = async ({ telemetry }) => {
  const serving = loadServingConfig('cloud');
  // The queue gauge reads the pool, which is made after the metrics it reports into.
  const live: { pool?: InferencePool } = {};
  const metrics = inferenceMetrics(telemetry, { queuedRows: () => live.pool?.queuedRows() ?? 0 });
  const pool = await createInferencePool({
    model: await loadModelBytes(serving.model),
    ...serving.pool,
    onRun: metrics.batchRows,
  });
  live.pool = pool;
  const definition = cloudInferDefinition({
    model: { name: serving.modelName, version: '1' },
    pool,
    maxBatch: serving.maxBatch,
    readiness: [],
    onAnswered: metrics.answered,
  });
  return { definition, close: () => pool.close() };
};

export default factory;
