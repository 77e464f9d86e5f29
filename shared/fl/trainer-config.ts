/**
 * fl-trainer's settings, read once at start-up: what reconcile-tick writes on the trainer's
 * Knative Service (flTrainerEnv: the job, this worker's name, the aggregator, the Dataset), the
 * node it runs on and that node's token (the aggregator accepts an update only when it is signed
 * with the token of the node the trainer is pinned to), and the trainer's own limits.
 */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { flTrainerEnv } from '../messages/federated.js';

const mib = 1024 * 1024;

const schema = flTrainerEnv.extend({
  EDGEAI_NODE: z.string().min(1).max(253),
  /** Optional: without it updates carry no credentials and the aggregator refuses them. */
  EDGEAI_NODE_TOKEN: z.string().min(1).optional(),
  FL_MAX_MODEL_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(64 * mib),
  FL_MAX_DATASET_BYTES: z.coerce
    .number()
    .int()
    .min(1)
    .default(256 * mib),
  /** Each call to the aggregator but the model download. */
  FL_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(1).default(30_000),
  /** The model download, which may be tens of MiB over an edge link. */
  FL_MODEL_TIMEOUT_MS: z.coerce.number().int().min(1).default(300_000),
  /**
   * The niceness of the training thread (0-19; the process itself stays at its own): training
   * yields the CPU to the trainer's messaging and to whatever else the node serves.
   */
  FL_TRAINING_NICE: z.coerce.number().int().min(0).max(19).default(10),
});

interface TrainerConfig {
  /** `<namespace>/<name>` of the FederatedLearningJob. */
  job: string;
  /** This trainer's name in the job (its Dataset's name). */
  worker: string;
  aggregatorUrl: string;
  /** `file:///path` or an absolute path. */
  datasetUrl: string;
  /** Sedna's Dataset format; the trainer reads `csv`, and reports any other as a failure. */
  datasetFormat: string;
  node: string;
  token: string | undefined;
  maxModelBytes: number;
  maxDatasetBytes: number;
  requestTimeoutMs: number;
  modelTimeoutMs: number;
  trainingNice: number;
}

/** Reads and checks the trainer's environment (ConfigError naming each bad variable). */
function loadTrainerConfig(env: Env = process.env): TrainerConfig {
  const raw = readEnv(schema, env);
  return {
    job: raw.FL_JOB,
    worker: raw.FL_WORKER,
    aggregatorUrl: raw.FL_AGGREGATOR_URL,
    datasetUrl: raw.DATASET_URL,
    datasetFormat: raw.DATASET_FORMAT,
    node: raw.EDGEAI_NODE,
    token: raw.EDGEAI_NODE_TOKEN,
    maxModelBytes: raw.FL_MAX_MODEL_BYTES,
    maxDatasetBytes: raw.FL_MAX_DATASET_BYTES,
    requestTimeoutMs: raw.FL_REQUEST_TIMEOUT_MS,
    modelTimeoutMs: raw.FL_MODEL_TIMEOUT_MS,
    trainingNice: raw.FL_TRAINING_NICE,
  };
}

export { loadTrainerConfig };
export type { TrainerConfig };
