/** reconcile-tick's settings, read once at start-up (docs/configuration.md "Per function"). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import type { WorkerSettings } from './knative-service.js';

const schema = z.object({
  WORKER_IMAGE: z.string().min(1, 'required: the image edge and cloud workers run'),
  UPSTREAM_STATUS_URL: z.url({ protocol: /^https?$/ }).optional(),
  WORKER_SECRET: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a Secret name')
    .optional(),
  // An MLGraph's Services' environment (REDIS_URL, REDIS_USERNAME=mlgraph, ...); default
  // WORKER_SECRET's.
  // A FederatedLearningJob's aggregator's environment (REDIS_URL, REDIS_USERNAME=fl-aggregator,
  // ...); default WORKER_SECRET's. Its trainers get none (they run on edge nodes).
  FL_SECRET: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a Secret name')
    .optional(),
  GRAPH_SECRET: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a Secret name')
    .optional(),
  // The Broker's ingress: federated aggregators announce each round's end there, so the job's
  // status shows it at once rather than at the next tick.
  BROKER_URL: z.url({ protocol: /^https?$/ }).optional(),
  STATUS_HEARTBEAT_SECONDS: z.coerce.number().int().min(1).default(3600),
  RECONCILE_CONCURRENCY: z.coerce.number().int().min(1).max(256).default(16),
});

interface ControllerConfig {
  workers: WorkerSettings;
  /** The same for an MLGraph's Services: their own Secret (their own Redis user). */
  graphs: WorkerSettings;
  /** The same for a FederatedLearningJob's aggregator and trainers. */
  federated: WorkerSettings;
  heartbeatMs: number;
  concurrency: number;
}

function loadControllerConfig(env: Env = process.env): ControllerConfig {
  const raw = readEnv(schema, env);
  return {
    workers: {
      image: raw.WORKER_IMAGE,
      upstreamStatusUrl: raw.UPSTREAM_STATUS_URL,
      workerSecret: raw.WORKER_SECRET,
    },
    graphs: {
      image: raw.WORKER_IMAGE,
      upstreamStatusUrl: undefined,
      workerSecret: raw.GRAPH_SECRET ?? raw.WORKER_SECRET,
    },
    federated: {
      image: raw.WORKER_IMAGE,
      upstreamStatusUrl: undefined,
      workerSecret: raw.FL_SECRET ?? raw.WORKER_SECRET,
      eventsUrl: raw.BROKER_URL,
    },
    heartbeatMs: raw.STATUS_HEARTBEAT_SECONDS * 1000,
    concurrency: raw.RECONCILE_CONCURRENCY,
  };
}

export { loadControllerConfig };
export type { ControllerConfig };
