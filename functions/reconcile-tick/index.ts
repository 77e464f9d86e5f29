/** reconcile-tick: the control plane's one reconcile engine and its kinds (see shared/controller). */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  createController,
  federatedKind,
  jointInferenceKind,
  loadControllerConfig,
  mlGraphKind,
  reconcileTickDefinition,
} from '../../shared/controller/index.js';
// The round store alone: the rest of shared/fl (the trainer, onnx-proto) is not this function's.
import { readProgress } from '../../shared/fl/progress.js';
import { createKube, loadKubeConfig } from '../../shared/k8s/index.js';
import { requireRedis } from '../../shared/redis/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadControllerConfig();
  const kube = createKube(loadKubeConfig());
  const located = config.redis.url ?? config.redis.clusterNodes ?? config.redis.sentinels;
  // FederatedLearningJobs need Redis (their rounds' progress); without it, the other kinds run.
  const redis =
    located === undefined ? undefined : requireRedis(config.redis, 'reconcile-tick', telemetry.log);
  const controller = createController({
    kube,
    kinds: [
      jointInferenceKind(settings.workers),
      mlGraphKind(settings.graphs),
      ...(redis === undefined
        ? []
        : [federatedKind(settings.federated, { read: (job) => readProgress(redis, job) })]),
    ],
    heartbeatMs: settings.heartbeatMs,
    concurrency: settings.concurrency,
    log: telemetry.log,
  });
  const definition = reconcileTickDefinition({
    controller,
    // Not Redis: while it is away only the federated jobs wait (their passes fail and are
    // retried); the other kinds go on.
    readiness: [{ name: 'kubernetes', check: () => kube.ping() }],
  });
  return { definition, close: async () => redis?.disconnect() };
};

export default factory;
