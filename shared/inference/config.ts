/** edge-infer's and cloud-infer's settings, read once at start-up (docs/configuration.md "The inference workers"). */
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { fallbackPolicies, miningModes, offloadModes } from '../crds/schemas.js';
import type { TaskSpec } from '../crds/index.js';
import { ConfigError } from '../errors/index.js';
import type { EdgeEnvName, ServingEnvName } from '../messages/worker-env.js';
import type { ModelSource } from './model-source.js';
import { parseTaskVariable } from './task.js';

const int = (min: number, fallback: number) => z.coerce.number().int().min(min).default(fallback);
const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a lowercase RFC 1123 label')
  .max(63);

const servingSchema = z.object({
  MODEL_NAME: dnsLabel.optional(),
  MODEL_URL: z.string().min(1, 'required'),
  MODEL_SHA256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits')
    .optional(),
  MODEL_ROOT: z.string().optional(),
  MODEL_CACHE_DIR: z.string().optional(),
  MODEL_MAX_BYTES: int(1, 64 * 1024 * 1024),
  MODEL_FETCH_TIMEOUT_MS: int(1, 60_000),
  MAX_BATCH: int(1, 1024),
  INFERENCE_THREADS: int(1, 1),
  POOL_MAX_BATCH: int(1, 256),
  POOL_MAX_QUEUE_ROWS: int(1, 16_384),
  POOL_MAX_WAIT_MS: int(0, 0),
  // Queued and running together; past it a retryable 503 (pool.ts).
  POOL_DEADLINE_MS: int(1, 5000),
  // While small requests wait, large ones' steps on the HTTP thread every this many turns.
  POOL_LARGE_TURNS_APART: int(1, 3),
  // Chaos testing only: stop one inference thread every this many ms (0: never).
  POOL_CHAOS_STOP_MS: int(0, 0),
  WORKER_PARAMETERS: z.string().optional(),
  TASK: z.string().optional(),
});

const edgeSchema = z.object({
  HEM_NAME: z.string().default('Threshold'),
  HEM_PARAMETERS: z.string().optional(),
  // The CRD's values, as reconcile-tick copies them from the spec.
  MINING_MODE: z.enum(miningModes).default('inference-then-mining'),
  OFFLOAD_MODE: z.enum(offloadModes).default('sync'),
  OFFLOAD_DEADLINE_MS: int(1, 2000),
  OFFLOAD_RETRIES: int(0, 1),
  CLOUD_FALLBACK: z.enum(fallbackPolicies).default('edge-result'),
  CLOUD_URL: z.url({ protocol: /^https?$/ }).optional(),
  CLOUD_MODEL_NAME: dnsLabel.default('cloud'),
  BREAKER_FAILURES: int(1, 5),
  BREAKER_HALF_OPEN_MS: int(1, 5000),
  K_SINK: z.url({ protocol: /^https?$/ }).optional(),
  UPSTREAM_STATUS_URL: z.url({ protocol: /^https?$/ }).optional(),
  EDGEAI_SERVICE: z
    .string()
    .regex(/^[a-z0-9-]{1,63}\/[a-z0-9.-]{1,253}$/, 'must be <namespace>/<name>')
    .optional(),
  EDGEAI_NODE: z.string().min(1).max(253).optional(),
  EDGEAI_NODE_TOKEN: z.string().min(1).optional(),
  REPORT_INTERVAL_MS: int(100, 10_000),
  BUDGET_WINDOW: int(100, 2000),
  BUDGET_REFRESH_MS: int(50, 1000),
  TASK_POLL_MS: int(100, 5000),
  EVENT_ANSWER_LEASE_SECONDS: int(1, 5),
  EVENT_ANSWER_KEEP_SECONDS: int(1, 120),
  ACCURACY_OBJECTIVE: z.coerce
    .number()
    .min(0, 'must be 0 to 100 (points)')
    .max(100, 'must be 0 to 100 (points)')
    .optional(),
  SHADOW_RATE: z.coerce.number().min(0).max(1).default(0.05),
  SHADOW_MAX_IN_FLIGHT: int(1, 4),
  OBJECTIVE_Z: z.coerce.number().min(0).max(10).default(1),
  OBJECTIVE_MIN_LABELLED: int(1, 200),
  QUALITY_BUCKET: int(10, 250),
  QUALITY_BUCKETS: int(2, 80),
  QUALITY_REFRESH_MS: int(50, 500),
  DRIFT_DETECTION: z.enum(['auto', 'off']).default('auto'),
  DRIFT_REFERENCE_URL: z.string().min(1).optional(),
  DRIFT_WINDOW: int(20, 1000),
  DRIFT_SAMPLE_RATE: z.coerce.number().min(0).max(1).default(0.5),
  DRIFT_SAMPLE_ROWS: int(1, 8),
  DRIFT_RAISE: z.coerce.number().min(0).default(5),
  DRIFT_CLEAR: z.coerce.number().min(0).default(2),
});

// Every variable reconcile-tick writes for the worker config is read here (messages/worker-env.ts):
// a name dropped or renamed in a schema, or added to the contract, fails to compile.
const _servingReads: Record<ServingEnvName, z.ZodType> = servingSchema.shape;
const _edgeReads: Record<EdgeEnvName, z.ZodType> = edgeSchema.shape;

interface ServingConfig {
  modelName: string;
  /** The seed's string key/value list (Sedna's snake_case keys), for the miner and the task. */
  workerParameters: Record<string, string>;
  /** How to read the model's outputs (the CRD's task object). */
  task: TaskSpec;
  /** The sample's `nms_threshold` worker parameter, when given. */
  nmsThreshold: number | undefined;
  model: Omit<ModelSource, 'fetch'>;
  maxBatch: number;
  pool: {
    threads: number;
    maxBatch: number;
    maxQueueRows: number;
    maxWaitMs: number;
    deadlineMs: number;
    largeTurnsApart: number;
    chaosStopEveryMs: number;
  };
}

function loadServingConfig(worker: 'edge' | 'cloud', env: Env = process.env): ServingConfig {
  const raw = readEnv(servingSchema, env);
  const workerParameters = jsonObject('WORKER_PARAMETERS', raw.WORKER_PARAMETERS);
  const nms = workerParameters['nms_threshold'];
  const nmsThreshold = nms === undefined ? undefined : Number(nms);
  if (nmsThreshold !== undefined && !(nmsThreshold >= 0 && nmsThreshold <= 1)) {
    throw new ConfigError(
      `WORKER_PARAMETERS: nms_threshold must be a number in [0, 1], got ${nms}`,
    );
  }
  return {
    modelName: raw.MODEL_NAME ?? worker,
    workerParameters,
    task: parseTaskVariable(raw.TASK),
    nmsThreshold,
    model: {
      url: raw.MODEL_URL,
      sha256: raw.MODEL_SHA256,
      root: raw.MODEL_ROOT ?? join(process.cwd(), 'models'),
      cacheDir: raw.MODEL_CACHE_DIR ?? join(tmpdir(), 'edgeai-models'),
      maxBytes: raw.MODEL_MAX_BYTES,
      timeoutMs: raw.MODEL_FETCH_TIMEOUT_MS,
    },
    maxBatch: raw.MAX_BATCH,
    pool: {
      threads: raw.INFERENCE_THREADS,
      maxBatch: raw.POOL_MAX_BATCH,
      maxQueueRows: raw.POOL_MAX_QUEUE_ROWS,
      maxWaitMs: raw.POOL_MAX_WAIT_MS,
      deadlineMs: raw.POOL_DEADLINE_MS,
      largeTurnsApart: raw.POOL_LARGE_TURNS_APART,
      chaosStopEveryMs: raw.POOL_CHAOS_STOP_MS,
    },
  };
}

/** A JSON object of strings or numbers from a variable, or a ConfigError naming it. */
function jsonObject(name: string, text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ConfigError(`${name}: not JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError(`${name}: must be a JSON object`);
  }
  return Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, String(v)]));
}

function loadEdgeConfig(env: Env = process.env) {
  const raw = readEnv(edgeSchema, env);
  return {
    hem: {
      name: raw.HEM_NAME,
      /** The CRD's typed parameters; they win over the string list (ServingConfig). */
      typedParameters: jsonObject('HEM_PARAMETERS', raw.HEM_PARAMETERS),
    },
    joint: { miningMode: raw.MINING_MODE, offload: raw.OFFLOAD_MODE, fallback: raw.CLOUD_FALLBACK },
    cloud:
      raw.CLOUD_URL === undefined
        ? undefined
        : {
            url: raw.CLOUD_URL,
            model: raw.CLOUD_MODEL_NAME,
            deadlineMs: raw.OFFLOAD_DEADLINE_MS,
            retries: raw.OFFLOAD_RETRIES,
            breakerFailures: raw.BREAKER_FAILURES,
            halfOpenMs: raw.BREAKER_HALF_OPEN_MS,
          },
    sink: raw.K_SINK,
    budget: {
      window: raw.BUDGET_WINDOW,
      refreshMs: raw.BUDGET_REFRESH_MS,
    },
    taskPollMs: raw.TASK_POLL_MS,
    quality: {
      /** Points, as the CRD states it; undefined: the miner's own parameters decide. */
      objective: raw.ACCURACY_OBJECTIVE,
      shadowRate: raw.SHADOW_RATE,
      shadowMaxInFlight: raw.SHADOW_MAX_IN_FLIGHT,
      z: raw.OBJECTIVE_Z,
      minLabelled: raw.OBJECTIVE_MIN_LABELLED,
      bucketSize: raw.QUALITY_BUCKET,
      buckets: raw.QUALITY_BUCKETS,
      refreshMs: raw.QUALITY_REFRESH_MS,
      /** `off`: no drift test even when the model has a reference beside it. */
      driftDetection: raw.DRIFT_DETECTION,
      driftReference: raw.DRIFT_REFERENCE_URL,
      driftWindow: raw.DRIFT_WINDOW,
      driftSampleRate: raw.DRIFT_SAMPLE_RATE,
      driftSampleRows: raw.DRIFT_SAMPLE_ROWS,
      raiseAt: raw.DRIFT_RAISE,
      clearAt: Math.min(raw.DRIFT_CLEAR, raw.DRIFT_RAISE),
    },
    eventAnswers: {
      leaseSeconds: raw.EVENT_ANSWER_LEASE_SECONDS,
      keepSeconds: raw.EVENT_ANSWER_KEEP_SECONDS,
    },
    service: raw.EDGEAI_SERVICE,
    node: raw.EDGEAI_NODE,
    // Reports need all four; a worker without them (local runs) keeps its counters to itself.
    report:
      raw.UPSTREAM_STATUS_URL === undefined ||
      raw.EDGEAI_SERVICE === undefined ||
      raw.EDGEAI_NODE === undefined ||
      raw.EDGEAI_NODE_TOKEN === undefined
        ? undefined
        : {
            url: raw.UPSTREAM_STATUS_URL,
            namespace: raw.EDGEAI_SERVICE.split('/')[0]!,
            name: raw.EDGEAI_SERVICE.split('/')[1]!,
            node: raw.EDGEAI_NODE,
            token: raw.EDGEAI_NODE_TOKEN,
            intervalMs: raw.REPORT_INTERVAL_MS,
          },
  };
}

export { loadServingConfig, loadEdgeConfig };
export type { ServingConfig };
