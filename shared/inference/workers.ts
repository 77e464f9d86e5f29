/**
 * The two inference workers assembled from their settings: what functions/edge-infer and
 * functions/cloud-infer start. Everything that can be wrong with the settings or the model (an
 * unknown miner, a task that does not fit the model's outputs, a model that does not load) is a
 * ConfigError at start-up: the worker never becomes ready, and Knative shows why.
 */
import { hostname } from 'node:os';
import type { RuntimeConfig } from '../config/index.js';
import { ConfigError } from '../errors/index.js';
import type { FunctionDefinition } from '../http/index.js';
import type { RedisClient } from '../redis/client.js';
import type { Telemetry } from '../telemetry/index.js';
import { createBudget } from './budget.js';
import { loadEdgeConfig, loadServingConfig } from './config.js';
import type { ServingConfig } from './config.js';
import { cloudInferDefinition, edgeInferDefinition, threadsReadiness } from './definition.js';
import { sharedAnswers } from './event-answers.js';
import { WorkerCounters, checkJointSettings } from './joint.js';
import type { JointDeps } from './joint.js';
import { inferenceMetrics, qualityMetrics } from './metrics.js';
import { minerFromConfig } from './miner-config.js';
import { loadModelBytes } from './model-source.js';
import { createOutlierScorer, parseDriftReference } from './outlier.js';
import type { DriftReference, OutlierScorer } from './outlier.js';
import { qualityReport } from './quality-report.js';
import { createQualityWindow } from './quality-window.js';
import type { QualityWindow } from './quality-window.js';
import { createShadow } from './shadow.js';
import { createInferencePool } from './pool.js';
import type { InferencePool, ServingPool, ThreadEvent } from './pool.js';
import { createTaskAdapter } from './task.js';

interface Runtime {
  config: RuntimeConfig;
  telemetry: Telemetry;
}

interface Worker {
  definition: FunctionDefinition;
  close(): Promise<void>;
}

/** A thread's death or failed start is an error in the log; its replacement, a notice. */
function logThreadEvent(telemetry: Telemetry, event: ThreadEvent): void {
  if (event.kind === 'replaced') telemetry.log.info(event, 'inference thread replaced');
  else telemetry.log.error(event, `inference thread ${event.kind}`);
}

/** A failure to load or serve the model, as the ConfigError naming MODEL_URL. */
function modelError(err: unknown): ConfigError {
  if (err instanceof ConfigError) return err;
  return new ConfigError(`MODEL_URL: ${err instanceof Error ? err.message : String(err)}`);
}

/**
 * The model's pool and task adapter, with the queue gauge wired to the pool. `meanwhile` runs
 * while the pool's threads load the model (on the other cores): start-up work that does not need
 * the pool, whose outcome is returned as it settled.
 */
async function serveModel<T>(
  serving: ServingConfig,
  telemetry: Telemetry,
  counters: WorkerCounters | undefined,
  meanwhile: () => Promise<T>,
) {
  // The queue gauge reads the pool, which is made after the metrics it reports into.
  const live: { pool?: InferencePool } = {};
  const metrics = inferenceMetrics(telemetry, {
    ...(counters === undefined ? {} : { counters }),
    queuedRows: () => live.pool?.queuedRows() ?? 0,
  });
  let starting: Promise<ServingPool>;
  try {
    // The threads are started by the call itself; the pool is ready when it resolves.
    starting = createInferencePool({
      model: await loadModelBytes(serving.model),
      ...serving.pool,
      onRun: metrics.batchRows,
      onThreadEvent: (event) => logThreadEvent(telemetry, event),
    });
  } catch (err) {
    throw modelError(err);
  }
  // Awaited below: not an unhandled rejection while `meanwhile` runs.
  starting.catch(() => undefined);
  const [early] = await Promise.allSettled([meanwhile()]);
  let pool: ServingPool;
  try {
    pool = await starting;
  } catch (err) {
    throw modelError(err);
  }
  live.pool = pool;
  try {
    const task = createTaskAdapter(serving.task, pool.signature, serving.nmsThreshold);
    return { model: { pool, metrics, task }, early };
  } catch (err) {
    await pool.close();
    throw err;
  }
}

/** cloud-infer: the big model behind the Open Inference Protocol. */
async function startCloudWorker({ telemetry }: Runtime): Promise<Worker> {
  const serving = loadServingConfig('cloud');
  const { model } = await serveModel(serving, telemetry, undefined, async () => undefined);
  const { pool, metrics, task } = model;
  const definition = cloudInferDefinition({
    model: { name: serving.modelName, version: '1' },
    pool,
    task,
    maxBatch: serving.maxBatch,
    readiness: [threadsReadiness(pool)],
    onAnswered: metrics.answered,
  });
  return { definition, close: () => pool.close() };
}

/**
 * The budget for a target offload ratio, replaced whenever the target changes (a task reload):
 * the running one stops first, so two never refresh the same window from one process.
 */
function budgetHolder(joint: JointDeps, make: (target: number) => JointDeps['budget']) {
  return (target: number | undefined) => {
    joint.budget?.stop();
    const next = target === undefined ? undefined : make(target);
    if (next === undefined) delete joint.budget;
    else joint.budget = next;
  };
}

type EdgeConfig = ReturnType<typeof loadEdgeConfig>;

/** A drift reference read and checked, and where it came from. */
type LoadedReference = { url: string; reference: DriftReference } | undefined;

/**
 * The drift reference: DRIFT_REFERENCE_URL, else `<model>.drift.json` beside the model when
 * there is one (models/*.drift.json are written by `npm run models`). An explicit URL that does
 * not load stops the worker; a missing sibling only means no drift detection.
 */
async function driftReference(
  serving: ServingConfig,
  edge: EdgeConfig,
  telemetry: Telemetry,
): Promise<LoadedReference> {
  if (edge.quality.driftDetection === 'off') return undefined;
  const explicit = edge.quality.driftReference;
  const url = explicit ?? serving.model.url.replace(/\.onnx$/, '.drift.json');
  if (url === serving.model.url) return undefined;
  let bytes: Uint8Array;
  try {
    bytes = await loadModelBytes({ ...serving.model, url, sha256: undefined, maxBytes: 16 << 20 });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    if (explicit !== undefined) throw new ConfigError(`DRIFT_REFERENCE_URL: ${reason}`);
    telemetry.log.info({ url }, 'no drift reference beside the model; drift detection is off');
    return undefined;
  }
  try {
    return { url, reference: parseDriftReference(JSON.parse(new TextDecoder().decode(bytes))) };
  } catch (err) {
    throw new ConfigError(
      `drift reference ${url}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** The outlier scorer of a drift reference, for the model's first input. */
function driftScorer(loaded: LoadedReference, pool: InferencePool): OutlierScorer | undefined {
  if (loaded === undefined) return undefined;
  try {
    return createOutlierScorer(loaded.reference, pool.signature.inputs[0]!);
  } catch (err) {
    throw new ConfigError(
      `drift reference ${loaded.url}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** The shared window, the shadow sampler and the outlier scorer the joint path reads. */
function qualityParts(
  edge: EdgeConfig,
  redis: RedisClient | undefined,
  service: string,
  scorer: OutlierScorer | undefined,
  telemetry: Telemetry,
  counters: WorkerCounters,
): Pick<JointDeps, 'quality' | 'shadow' | 'outliers'> {
  const q = edge.quality;
  if (q.objective === undefined && scorer === undefined) return {};
  const quality: QualityWindow = createQualityWindow({
    redis,
    service,
    reporter: `${hostname()}:${process.pid}:${Date.now()}`,
    bucketSize: q.bucketSize,
    buckets: q.buckets,
    driftWindow: q.driftWindow,
    refreshMs: q.refreshMs,
    calibration:
      q.objective === undefined
        ? undefined
        : { objective: q.objective / 100, z: q.z, minLabelled: q.minLabelled },
    drift:
      scorer === undefined
        ? undefined
        : { expectedShare: 0.05, raiseAt: q.raiseAt, clearAt: q.clearAt, minInputs: 100 },
    log: telemetry.log,
  });
  const input = scorer?.reference.input;
  const metrics = qualityMetrics(telemetry, { state: () => quality.state(), counters });
  return {
    quality,
    ...(q.objective === undefined || edge.cloud === undefined
      ? {}
      : {
          shadow: createShadow({
            rate: q.shadowRate,
            maxInFlight: q.shadowMaxInFlight,
            onOutcome: metrics.shadowOutcome,
          }),
        }),
    ...(scorer === undefined || input === undefined
      ? {}
      : {
          outliers: {
            score: (inputs, rows) => scorer.score(inputs[input]!, rows),
            // The reference's 95th percentile: 5% of clean inputs score above it (driftTest's p0).
            cut: scorer.reference.quantiles.p95,
            sampleRate: q.driftSampleRate,
            sampleRows: q.driftSampleRows,
            random: Math.random,
          },
        }),
  };
}

/** What serveModel serves: the pool, its metrics and the task adapter. */
type ServedModel = Awaited<ReturnType<typeof serveModel>>['model'];

/**
 * The settings checked against the model and each other, then the drift scorer from the
 * reference read while the model loaded; on any problem the pool is closed (its threads would
 * keep the process alive) and the ConfigError thrown.
 */
async function checkedScorer(
  edge: EdgeConfig,
  mining: { miner: string; targetOffloadRatio: number | undefined },
  model: ServedModel,
  reference: PromiseSettledResult<LoadedReference>,
): Promise<OutlierScorer | undefined> {
  try {
    checkJointSettings(
      edge.joint,
      mining.miner,
      model.task,
      edge.sink !== undefined,
      edge.quality.objective !== undefined,
    );
    if (mining.targetOffloadRatio !== undefined && edge.quality.objective !== undefined) {
      throw new ConfigError(
        'ACCURACY_OBJECTIVE: an objective sets the offload cut itself; remove targetOffloadRatio (the budget) or the objective',
      );
    }
    if (reference.status === 'rejected') throw reference.reason;
    return driftScorer(reference.value, model.pool);
  } catch (err) {
    await model.pool.close();
    throw err;
  }
}

/** The quality figures the status report and GET /skew carry, when there is a window. */
function qualityReporter(edge: EdgeConfig, window: QualityWindow | undefined) {
  if (window === undefined) return undefined;
  const { objective, shadowRate, raiseAt } = edge.quality;
  return () => qualityReport(window, { objective, shadowRate, raiseAt });
}

/**
 * The modules only some settings use, loaded only when those are set (started before the model
 * loads, awaited after it): ioredis with REDIS_URL, the cloud client (cockatiel) with CLOUD_URL,
 * the hard-example sink (the CloudEvents SDK) with K_SINK, the status reporter (the worker
 * message's schema, and with it every CRD's) with UPSTREAM_STATUS_URL, the task watcher with
 * Redis, NODE_NAME and SERVICE_NAME. Loading modules is most of a worker's
 * start on the HTTP thread (docs/benchmarks.md, the edge worker), and a worker without these
 * settings never uses them.
 */
async function optionalModules(config: RuntimeConfig, edge: EdgeConfig) {
  const redis = config.redis.url === undefined ? undefined : import('../redis/connection.js');
  const watching = redis !== undefined && edge.node !== undefined && edge.service !== undefined;
  const [connection, cloud, sink, reporter, taskReload] = await Promise.all([
    redis,
    edge.cloud === undefined ? undefined : import('./cloud-client.js'),
    edge.sink === undefined ? undefined : import('./sink.js'),
    edge.report === undefined ? undefined : import('./reporter.js'),
    watching ? import('./task-reload.js') : undefined,
  ]);
  return { connection, cloud, sink, reporter, taskReload };
}

type OptionalModules = Awaited<ReturnType<typeof optionalModules>>;

/** The cloud client and the hard-example sink, when configured. */
function offloadParts(
  edge: EdgeConfig,
  modules: OptionalModules,
): Pick<JointDeps, 'cloud' | 'emitHardExamples'> {
  const { cloud, sink } = modules;
  return {
    cloud:
      edge.cloud === undefined || cloud === undefined
        ? undefined
        : cloud.createCloudClient(edge.cloud),
    ...(edge.sink === undefined || sink === undefined
      ? {}
      : {
          emitHardExamples: sink.createHardExampleSink({
            url: edge.sink,
            source: '/apis/edgeai.io/functions/edge-infer',
            attempts: 3,
          }),
        }),
  };
}

/** What runs beside the requests: the status reporter and the task watcher, when configured. */
function edgeBackground(
  edge: EdgeConfig,
  parts: {
    joint: JointDeps;
    redis: RedisClient | undefined;
    /** The task watcher's and the reporter's modules, when loaded (optionalModules). */
    modules: OptionalModules;
    counters: WorkerCounters;
    quality: (() => ReturnType<typeof qualityReport>) | undefined;
    setBudget: (target: number | undefined) => void;
  },
  telemetry: Telemetry,
) {
  const reporter =
    edge.report === undefined || parts.modules.reporter === undefined
      ? undefined
      : parts.modules.reporter.startReporter({
          ...edge.report,
          reporter: `${hostname()}:${Date.now()}`,
          counters: parts.counters,
          log: telemetry.log,
          ...(parts.quality === undefined ? {} : { quality: parts.quality }),
        });
  const watcher =
    parts.redis === undefined ||
    parts.modules.taskReload === undefined ||
    edge.node === undefined ||
    edge.service === undefined
      ? undefined
      : parts.modules.taskReload.watchTask({
          redis: parts.redis,
          node: edge.node,
          service: edge.service,
          target: parts.joint,
          onBudget: parts.setBudget,
          pollMs: edge.taskPollMs,
          log: telemetry.log,
        });
  return { reporter, watcher };
}

/** edge-infer: the small model, hard-example mining and offload. */
async function startEdgeWorker({ config, telemetry }: Runtime): Promise<Worker> {
  const serving = loadServingConfig('edge');
  const edge = loadEdgeConfig();
  const { miner, targetOffloadRatio } = minerFromConfig({
    ...edge.hem,
    workerParameters: serving.workerParameters,
  });
  const counters = new WorkerCounters();
  const loading = optionalModules(config, edge);
  // Awaited below: not an unhandled rejection should the settings or the model fail first.
  loading.catch(() => undefined);
  // The drift reference is read and checked while the model loads in its threads.
  const { model, early } = await serveModel(serving, telemetry, counters, () =>
    driftReference(serving, edge, telemetry),
  );
  const { pool, metrics, task } = model;
  const mining = { miner: miner.name, targetOffloadRatio };
  const scorer = await checkedScorer(edge, mining, model, early);
  const modules = await loading;
  const warn = (fields: Record<string, unknown>, message: string) =>
    telemetry.log.warn(fields, message);
  const redis: RedisClient | undefined =
    modules.connection === undefined
      ? undefined
      : modules.connection.requireRedis(config.redis, 'edge-infer', telemetry.log);
  // Replicas of one service share a budget window; a worker outside a service has its own.
  const service = edge.service ?? `local/${serving.modelName}`;
  const joint: JointDeps = {
    edge: pool,
    task,
    miner,
    settings: edge.joint,
    counters,
    observe: metrics.observe,
    ...qualityParts(edge, redis, service, scorer, telemetry, counters),
    ...offloadParts(edge, modules),
  };
  const setBudget = budgetHolder(joint, (target) =>
    createBudget({ redis, service, target, ...edge.budget, log: telemetry.log }),
  );
  setBudget(targetOffloadRatio);
  const quality = qualityReporter(edge, joint.quality);
  const background = edgeBackground(
    edge,
    { joint, redis, modules, counters, quality, setBudget },
    telemetry,
  );
  const definition = edgeInferDefinition({
    model: { name: serving.modelName, version: '1' },
    joint,
    maxBatch: serving.maxBatch,
    readiness: [threadsReadiness(pool)],
    onAnswered: metrics.answered,
    ...(quality === undefined ? {} : { quality }),
    ...(redis === undefined
      ? {}
      : { sharedAnswers: sharedAnswers(redis, { scope: service, ...edge.eventAnswers, warn }) }),
  });
  return {
    definition,
    async close() {
      background.watcher?.stop();
      joint.budget?.stop();
      joint.quality?.stop();
      await joint.shadow?.idle();
      // After the shadow calls in flight: the last report counts their outcomes.
      await background.reporter?.stop();
      redis?.disconnect();
      await pool.close();
    },
  };
}

export { startEdgeWorker, startCloudWorker };
