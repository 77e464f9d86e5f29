/** aset-scheduler: binds inference streams to model variants across clusters (ASET). */
import type { FunctionFactory } from '../../shared/http/index.js';
import {
  asetSchedulerDefinition,
  createAsetScheduler,
  createBindingStore,
  createDeployedController,
  endpointFrom,
  loadAsetSchedulerConfig,
  loadScenario,
  readTrainedNetwork,
  scenarioFingerprint,
} from '../../shared/aset/index.js';
import { redisReadiness, requireRedis } from '../../shared/redis/index.js';
import { defineMetrics } from '../../shared/telemetry/index.js';

const factory: FunctionFactory = async ({ config, telemetry }) => {
  const settings = loadAsetSchedulerConfig();
  const scenario = await loadScenario(settings.dataDir, settings.topology);
  const { topology } = scenario;
  const controller = await createDeployedController({
    network: readTrainedNetwork(settings.modelsDir, scenario),
    topology,
  });
  const redis = requireRedis(config.redis, 'aset-scheduler', telemetry.log);
  const metrics = defineMetrics(telemetry);
  const windows = metrics.counter(
    'edgeai_aset_windows_total',
    'Windows of T this replica rolled, by the policy the meta-policy chose for the next one',
    ['policy'],
  );
  const decisions = metrics.counter(
    'edgeai_aset_streams_total',
    'Stream requests answered, by outcome (bound, replay, rejected) and the policy in force',
    ['outcome', 'policy'],
  );
  const template = settings.endpointTemplate;
  const scheduler = createAsetScheduler({
    topology,
    store: createBindingStore(redis, {
      // The scenario's fingerprint in the keys: a retrained topology with other workers must
      // not read the bindings and loads of the old one by worker index.
      topology: `${topology.name}-${scenarioFingerprint(scenario).slice(0, 12)}`,
      workers: topology.workers.length,
      tombstoneMs: settings.tombstoneMs,
      dedupeSeconds: settings.dedupeSeconds,
    }),
    controller,
    windowMs: settings.windowMs,
    leaseGraceMs: settings.leaseGraceMs,
    now: Date.now,
    uniform: Math.random,
    ...(template === undefined
      ? {}
      : {
          endpointFor: (w) =>
            endpointFrom(template, {
              variant: w.variant.id,
              model: w.model.id,
              cluster: w.cluster.id,
            }),
        }),
    onChoiceError: (err) =>
      telemetry.log.error({ err }, 'the meta-policy failed to choose; the previous policy stays'),
    onDecision: (outcome, policy) => decisions({ outcome, policy }),
    onWindow: (policy) => windows({ policy }),
  });
  return {
    definition: asetSchedulerDefinition({
      scheduler,
      reportToken: settings.reportToken,
      readiness: [redisReadiness(redis)],
    }),
    close: async () => {
      redis.disconnect();
      await controller.close();
    },
  };
};

export default factory;
