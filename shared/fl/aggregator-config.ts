/**
 * fl-aggregator's settings, read once at start-up. The job comes whole in FL_JOB_CONFIG, as
 * reconcile-tick wrote it (shared/messages/federated.ts); each trainer's node token in
 * FL_TRAINER_TOKEN_<i> (the i-th trainer's, from its node's Secret), so the aggregator checks
 * who sends an update without reading Secrets itself.
 */
import { join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors/index.js';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { flJobConfig } from '../messages/federated.js';
import type { FlJobConfig } from '../messages/federated.js';

const schema = z.object({
  FL_JOB_CONFIG: z.string().min(1, 'required: the job, as reconcile-tick writes it'),
  FL_CLAIM_LEASE_MS: z.coerce.number().int().min(100).default(60_000),
  FL_MAX_UPDATE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(64 * 1024 * 1024),
  FL_MAX_MODEL_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(64 * 1024 * 1024),
  /**
   * Models up to this size travel inside the round event (one request per trainer and round, the
   * model pushed as Flower and Sedna push it); larger ones, and a trainer that refuses the size
   * (413), download it from /v1/models/<version>. Trainers' BODY_LIMIT_BYTES must allow it
   * (reconcile-tick sets it so). 0: always download.
   */
  FL_INLINE_MODEL_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(8 * 1024 * 1024),
  /** Where "a round ended" goes (the Broker): reconcile-tick then shows it in the job's status. */
  FL_EVENTS_URL: z.url({ protocol: /^https?$/ }).optional(),
  FL_MAX_DATASET_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024 * 1024),
  /** Directory file:// models must live in (default: ./models, as the inference workers'). */
  MODEL_ROOT: z.string().optional(),
  /**
   * The niceness (0-19) of the thread that measures each new model: the rounds' messaging (the
   * model pushed to the trainers, the updates taken in) goes first.
   */
  FL_EVALUATION_NICE: z.coerce.number().int().min(0).max(19).default(10),
});

interface AggregatorConfig {
  job: FlJobConfig;
  /** Node token of each trainer, by trainer name (none: its updates are refused). */
  tokens: ReadonlyMap<string, Buffer>;
  leaseMs: number;
  maxUpdateBytes: number;
  maxModelBytes: number;
  maxDatasetBytes: number;
  inlineModelBytes: number;
  eventsUrl: string | undefined;
  modelRoot: string;
  evaluationNice: number;
}

function parseJob(text: string): FlJobConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`FL_JOB_CONFIG: not JSON (${(err as Error).message})`);
  }
  const parsed = flJobConfig.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`FL_JOB_CONFIG: ${problems.join('; ')}`);
  }
  return parsed.data;
}

function loadAggregatorConfig(env: Env = process.env): AggregatorConfig {
  const raw = readEnv(schema, env);
  const job = parseJob(raw.FL_JOB_CONFIG);
  const tokens = new Map<string, Buffer>();
  job.trainers.forEach((trainer, i) => {
    const token = env[`FL_TRAINER_TOKEN_${i}`];
    if (token !== undefined && token !== '') tokens.set(trainer.name, Buffer.from(token));
  });
  return {
    job,
    tokens,
    leaseMs: raw.FL_CLAIM_LEASE_MS,
    maxUpdateBytes: raw.FL_MAX_UPDATE_BYTES,
    maxModelBytes: raw.FL_MAX_MODEL_BYTES,
    maxDatasetBytes: raw.FL_MAX_DATASET_BYTES,
    inlineModelBytes: raw.FL_INLINE_MODEL_BYTES,
    eventsUrl: raw.FL_EVENTS_URL,
    modelRoot: raw.MODEL_ROOT ?? join(process.cwd(), 'models'),
    evaluationNice: raw.FL_EVALUATION_NICE,
  };
}

export { loadAggregatorConfig };
export type { AggregatorConfig };
