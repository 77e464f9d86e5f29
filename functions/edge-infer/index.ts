/** edge-infer: the small model, hard-example mining and offload (see shared/inference). */
import { hostname } from 'node:os';
import type { FunctionFactory } from '../../bin/serve.js';
import {
  WorkerCounters,
  checkJointSettings,
  createBudget,
  createHardExampleSink,
  createCloudClient,
  createInferencePool,
  edgeInferDefinition,
  inferenceMetrics,
  loadEdgeConfig,
  loadModelBytes,
  loadServingConfig,
  minerFromConfig,
  sharedAnswers,
  startReporter,
  watchTask,
} from '../../shared/inference/index.js';
import type { InferencePool, JointDeps } from '../../shared/inference/index.js';
import { requireRedis } from '../../shared/redis/index.js';
import { ConfigError } from '../../shared/errors/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
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
  const redis =
    config.redis.url === undefined
      ? undefined
      : requireRedis(config.redis, 'edge-infer', (fields, message) =>
          telemetry.log.warn(fields, message),
        );
  const service = edgeConfig.service ?? 'local/edge';
  // Budget mode: the HEM parameter targetOffloadRatio turns it on (CRD or task reload).
  const budgetFor = (target: number | undefined) =>
    target === undefined
      ? undefined
      : createBudget({ redis, service, target, ...edgeConfig.budget, log: telemetry.log });
  const joint: JointDeps = {
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
  };
  const initialTarget = Number(edgeConfig.hem.typedParameters['targetOffloadRatio']);
  joint.budget = budgetFor(Number.isFinite(initialTarget) ? initialTarget : undefined);
  const watcher =
    redis === undefined || edgeConfig.node === undefined || edgeConfig.service === undefined
      ? undefined
      : watchTask({
          redis,
          node: edgeConfig.node,
          service: edgeConfig.service,
          target: joint,
          onBudget(target) {
            joint.budget?.stop();
            const next = budgetFor(target);
            if (next === undefined) delete joint.budget;
            else joint.budget = next;
          },
          pollMs: edgeConfig.taskPollMs,
          log: telemetry.log,
        });
  const definition = edgeInferDefinition({
    model: { name: serving.modelName, version: '1' },
    joint,
    maxBatch: serving.maxBatch,
    readiness: [],
    onAnswered: metrics.answered,
    ...(redis === undefined
      ? {}
      : {
          sharedAnswers: sharedAnswers(redis, {
            scope: service,
            ...edgeConfig.eventAnswers,
            warn: (fields, message) => telemetry.log.warn(fields, message),
          }),
        }),
  });
  return {
    definition,
    async close() {
      watcher?.stop();
      joint.budget?.stop();
      await reporter?.stop();
      redis?.disconnect();
      await pool.close();
    },
  };
};

export default factory;
