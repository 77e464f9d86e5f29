/** edge-infer: the small model, hard-example mining and offload (see shared/inference). */
import { hostname } from 'node:os';
import type { FunctionFactory } from '../../bin/serve.js';
import {
  WorkerCounters,
  checkJointSettings,
  createHardExampleSink,
  createCloudClient,
  createInferencePool,
  edgeInferDefinition,
  inferenceMetrics,
  loadEdgeConfig,
  loadModelBytes,
  loadServingConfig,
  minerFromConfig,
  startReporter,
} from '../../shared/inference/index.js';
import type { InferencePool } from '../../shared/inference/index.js';
import { ConfigError } from '../../shared/errors/index.js';

const factory: FunctionFactory = async ({ telemetry }) => {
  const serving = loadServingConfig('edge');
  const edgeConfig = loadEdgeConfig();
  const miner = minerFromConfig(edgeConfig.hem);
  try {
    checkJointSettings(edgeConfig.joint, miner.name, edgeConfig.sink !== undefined);
  } catch (err) {
    throw new ConfigError(err instanceof Error ? err.message : String(err));
  }
  const counters = new WorkerCounters();
  // The queue gauge reads the pool, which is made after the metrics it reports into.
  const live: { pool?: InferencePool } = {};
  const metrics = inferenceMetrics(telemetry, {
    counters,
    queuedRows: () => live.pool?.queuedRows() ?? 0,
  });
  const pool = await createInferencePool({
    model: await loadModelBytes(serving.model),
    ...serving.pool,
    onRun: metrics.batchRows,
  });
  live.pool = pool;
  const cloud =
    edgeConfig.cloud === undefined
      ? undefined
      : createCloudClient({
          ...edgeConfig.cloud,
          inputWidth: pool.inputWidth,
          outputWidth: pool.outputWidth,
        });
  const reporter =
    edgeConfig.report === undefined
      ? undefined
      : startReporter({
          ...edgeConfig.report,
          reporter: `${hostname()}:${Date.now()}`,
          counters,
          log: telemetry.log,
        });
  const definition = edgeInferDefinition({
    model: { name: serving.modelName, version: '1' },
    joint: {
      edge: pool,
      cloud,
      miner,
      settings: edgeConfig.joint,
      counters,
      observe: metrics.observe,
      ...(edgeConfig.sink === undefined
        ? {}
        : {
            emitHardExamples: createHardExampleSink({
              url: edgeConfig.sink,
              source: '/apis/edgeai.io/functions/edge-infer',
              width: pool.inputWidth,
              attempts: 3,
            }),
          }),
    },
    maxBatch: serving.maxBatch,
    readiness: [],
    onAnswered: metrics.answered,
  });
  return {
    definition,
    async close() {
      await reporter?.stop();
      await pool.close();
    },
  };
};

export default factory;
