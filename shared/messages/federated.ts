/**
 * What the federated functions say to each other, one schema per message, used by both ends:
 * - the job as its aggregator runs it (FL_JOB_CONFIG, JSON): reconcile-tick writes it on the
 *   aggregator's Knative Service (shared/controller), the aggregator parses it at start-up;
 * - the trainer's environment (flTrainerEnv), the same way;
 * - a round started (aggregator → trainer): a JSON CloudEvent (roundStarted) naming the model to
 *   download, or a binary-mode one whose data is the model itself and whose `flstarted`
 *   extension is the same round as JSON (roundStartedAttributes);
 * - an update (trainer → aggregator): a binary-mode CloudEvent whose data is the encoded weights
 *   (shared/fl/weights.ts) and whose extensions say what they are (flUpdateAttributes);
 * - a trainer's failure (trainer → aggregator, JSON), which the job's restart policy judges.
 * docs/federated-learning.md shows each on the wire.
 */
import { z } from 'zod';

/** `<namespace>/<name>` of a FederatedLearningJob. */
const jobRef = z
  .string()
  .regex(
    /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/,
    'must be <namespace>/<name>',
  );

/** A trainer's name within its job (its Dataset's name). */
const workerName = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a Kubernetes object name');

const httpUrl = z.url({ protocol: /^https?$/ });

/** Local training, as the round asks for it (FedProx's proximal term when mu > 0). */
const trainingParameters = z
  .object({
    epochs: z.number().int().min(1).max(1000),
    /** 0: the whole local dataset in one batch (FedSGD). */
    batchSize: z.number().int().min(0),
    learningRate: z.number().positive(),
    seed: z.number().int(),
    proximalMu: z.number().min(0).default(0),
  })
  .strict();

/** [0, 1): a moment's decay. */
const decay = z.number().min(0).lt(1);
const serverRate = {
  /** The server's learning rate (Flower's eta). */
  eta: z.number().positive(),
  /** The trainers' (Flower's eta_l): informative, the trainers use `training.learningRate`. */
  etaL: z.number().positive().optional(),
  /** Adaptivity (Flower's tau). */
  tau: z.number().positive(),
};

/**
 * Flower's defaults for each server optimizer's parameters (fedadam.py, fedyogi.py,
 * fedadagrad.py): what reconcile-tick fills in for a job that names the algorithm alone.
 */
const fedOptDefaults = {
  fedadam: { kind: 'fedadam', eta: 1e-1, etaL: 1e-1, beta1: 0.9, beta2: 0.99, tau: 1e-9 },
  fedyogi: { kind: 'fedyogi', eta: 1e-2, etaL: 0.0316, beta1: 0.9, beta2: 0.99, tau: 1e-3 },
  fedadagrad: { kind: 'fedadagrad', eta: 1e-1, etaL: 1e-1, tau: 1e-9 },
} as const;

/** The strategies whose server step takes the mean of the updates (central DP can wrap them). */
const averagingStrategy = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('fedavg') }).strict(),
  /** mu is the trainers' proximal term (training.proximalMu); the server averages. */
  z.object({ kind: z.literal('fedprox'), mu: z.number().min(0) }).strict(),
  z
    .object({ kind: z.enum(['fedadam', 'fedyogi']), ...serverRate, beta1: decay, beta2: decay })
    .strict(),
  z.object({ kind: z.literal('fedadagrad'), ...serverRate }).strict(),
]);

/**
 * How the aggregator combines a round's updates (shared/fl/strategy: Flower's strategies by
 * name and parameter). Central DP's noise seed is not here: the aggregator draws it and keeps it
 * in the round store, out of every manifest and status.
 */
const flAggregation = z.union([
  averagingStrategy,
  z.object({ kind: z.literal('fedtrimmedavg'), beta: z.number().min(0).lt(0.5) }).strict(),
  /**
   * FedBuff (Nguyen et al. 2022): asynchronous buffered rounds. A round is a server step taken
   * every `bufferSize` updates from any trainer of the job; an update trained from a version up
   * to `maxStaleness` behind counts with weight (1 + staleness)^-stalenessExponent, an older one
   * is refused (stale-base); the step is the model plus `eta` times the weighted mean delta.
   */
  z
    .object({
      kind: z.literal('fedbuff'),
      bufferSize: z.number().int().min(1),
      maxStaleness: z.number().int().min(0),
      stalenessExponent: z.number().min(0),
      eta: z.number().positive(),
    })
    .strict(),
  z
    .object({ kind: z.literal('krum'), f: z.number().int().min(0), m: z.number().int().min(1) })
    .strict(),
  z
    .object({
      kind: z.literal('dp-fixed-clipping'),
      noiseMultiplier: z.number().min(0),
      clippingNorm: z.number().positive(),
      /** The delta of the (epsilon, delta) reported per round. */
      delta: z.number().positive().lt(1),
      /** Trainers sampled per round: the clipped mean's divisor, and the noise's. */
      sampled: z.number().int().min(1),
      inner: averagingStrategy,
    })
    .strict(),
]);

/**
 * How many trainers a round asks: max(int(fraction * n), minimum), as Flower rounds it (down).
 * reconcile-tick (central DP's divisor) and the aggregator's selection use this one rule.
 */
function sampleSize(n: number, fraction: number, minimum: number): number {
  return Math.max(Math.floor(n * fraction), minimum);
}

/** Which trainers a round asks (Flower's fraction_fit and min_fit_clients), seeded per round. */
const flSelection = z
  .object({
    fraction: z.number().min(0).max(1),
    minimum: z.number().int().min(1),
    seed: z.number().int(),
  })
  .strict();

const flTrainer = z
  .object({
    name: workerName,
    /** The node it runs on: its updates must be signed with that node's token. */
    node: z.string().min(1).max(253),
    /** Where round events reach it. */
    url: httpUrl,
  })
  .strict();

const flJobConfig = z
  .object({
    job: jobRef,
    /** The job's uid: a job deleted and created again under its name starts afresh. */
    uid: z.string().regex(/^[-a-z0-9]{1,64}$/, 'must be a Kubernetes uid'),
    /** The model round 1 trains from (the pretrained Model's, else the job's own). */
    initialModel: z.object({ url: z.string().min(1), sha256: z.string().optional() }).strict(),
    /** The trainers still in the job (a permanently failed one is left out). */
    trainers: z.array(flTrainer).min(1),
    round: z
      .object({
        minParticipants: z.number().int().min(1),
        timeoutMs: z.number().int().min(1),
        acceptFailures: z.boolean(),
      })
      .strict(),
    stop: z
      .object({
        maxRounds: z.number().int().min(1),
        targetAccuracy: z.number().min(0).max(1).optional(),
        minLossImprovement: z.number().min(0).optional(),
        patience: z.number().int().min(1).default(1),
      })
      .strict(),
    training: trainingParameters,
    aggregation: flAggregation.default({ kind: 'fedavg' }),
    selection: flSelection.default({ fraction: 1, minimum: 1, seed: 1 }),
    /** A Dataset the aggregator evaluates every new model on. */
    evaluation: z
      .object({ url: z.string().min(1), format: z.string().min(1) })
      .strict()
      .optional(),
    /** Where this aggregator answers, for the model URLs it hands out. */
    publicUrl: httpUrl,
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.selection.minimum > config.trainers.length)
      ctx.addIssue({
        code: 'custom',
        message: `selection.minimum ${config.selection.minimum} is more than the ${config.trainers.length} trainers`,
      });
    const names = new Set<string>();
    for (const trainer of config.trainers) {
      if (names.has(trainer.name))
        ctx.addIssue({ code: 'custom', message: `trainer ${trainer.name} is listed twice` });
      names.add(trainer.name);
    }
  });

/** The fl-trainer's environment, as reconcile-tick writes it. */
const flTrainerEnv = z.object({
  FL_JOB: jobRef,
  FL_WORKER: workerName,
  FL_AGGREGATOR_URL: httpUrl,
  DATASET_URL: z.string().min(1),
  DATASET_FORMAT: z.string().min(1),
});

/** A round started: the trainer trains `model` and sends its update before `deadline`. */
const roundStarted = z
  .object({
    job: jobRef,
    round: z.number().int().min(1),
    /** The model version the round trains from; an update must name it. */
    base: z.number().int().min(0),
    model: z.object({ url: httpUrl, sha256: z.string().regex(/^[0-9a-f]{64}$/) }).strict(),
    training: trainingParameters,
    deadline: z.iso.datetime(),
    /**
     * Asynchronous (FedBuff) rounds only: an update from a version up to this many behind the
     * round's base still counts, so a trainer training one keeps at it rather than start this.
     */
    maxStaleness: z.number().int().min(0).optional(),
  })
  .strict();

/**
 * A round event with its model inline: the round, as roundStarted's JSON, in one extension
 * (extension values are strings), the model's bytes as the event's data.
 */
const roundStartedAttributes = z.object({
  flstarted: z
    .string()
    .max(16 * 1024)
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a round as JSON' });
        return z.NEVER;
      }
    })
    .pipe(roundStarted),
});

const decimal = z
  .string()
  .regex(/^\d+$/, 'must be a whole number')
  .transform(Number)
  .pipe(z.number().int().min(0).max(Number.MAX_SAFE_INTEGER));

/** An update event's extensions (CloudEvent attribute names are lowercase letters and digits). */
const flUpdateAttributes = z.object({
  fljob: jobRef,
  flworker: workerName,
  flround: decimal.pipe(z.number().min(1)),
  flbase: decimal,
  flsamples: decimal.pipe(z.number().min(1)),
  flloss: z.string().transform(Number).pipe(z.number().min(0).finite()).optional(),
  fltrainms: decimal.optional(),
});

/** A worker whose update the strategy changed or left out, and the reason (never a value of it). */
const verdict = z.object({ worker: workerName, reason: z.string().max(256) }).strict();

/**
 * One round as the aggregator committed it: in the round store's history (which reconcile-tick
 * reads into the job's status) and in the round-completed event.
 */
const roundSummary = z.object({
  round: z.number().int().min(1),
  /** The model version the round made. */
  version: z.number().int().min(1),
  participants: z.number().int().min(0),
  stragglers: z.array(z.string()),
  closedBy: z.enum(['all', 'quorum', 'deadline']),
  durationMs: z.number().min(0),
  /** The slowest participant's own training time. */
  slowestTrainMs: z.number().min(0).optional(),
  loss: z.number().min(0).optional(),
  accuracy: z.number().min(0).max(1).optional(),
  /** Updates the strategy left out (Krum) or scaled to the clipping norm (central DP), and why. */
  rejected: z.array(verdict).optional(),
  clipped: z.array(verdict).optional(),
  /** Central DP: the epsilon spent by the job so far (at the job's delta). */
  epsilon: z.number().min(0).optional(),
});

/** A trainer that could not train: the job's restart policy judges its exit code. */
const trainerFailed = z
  .object({
    job: jobRef,
    worker: workerName,
    round: z.number().int().min(1).optional(),
    exitCode: z.number().int().min(0).max(255),
    message: z.string().max(1024),
  })
  .strict();

type FlJobConfig = z.output<typeof flJobConfig>;
type FlTrainerEnv = z.output<typeof flTrainerEnv>;
type RoundStarted = z.output<typeof roundStarted>;
type FlUpdateAttributes = z.output<typeof flUpdateAttributes>;
type TrainerFailed = z.output<typeof trainerFailed>;
type RoundSummary = z.output<typeof roundSummary>;
type TrainingParameters = z.output<typeof trainingParameters>;

export {
  fedOptDefaults,
  sampleSize,
  flJobConfig,
  flTrainerEnv,
  roundStarted,
  roundStartedAttributes,
  flUpdateAttributes,
  trainerFailed,
  roundSummary,
};
export type {
  FlJobConfig,
  FlTrainerEnv,
  RoundStarted,
  FlUpdateAttributes,
  TrainerFailed,
  RoundSummary,
  TrainingParameters,
};
