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
  loadEdgeConfig,
  loadModelBytes,
  loadServingConfig,
  minerFromConfig,
  startReporter,
} from '../../shared/inference/index.js';
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
  const pool = await createInferencePool({
    model: await loadModelBytes(serving.model),
    ...serving.pool,
  });
  const counters = new WorkerCounters();
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
