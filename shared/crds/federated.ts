/**
 * Federated learning: Sedna's FederatedLearningJob (trainers at the edge, each on its own
 * Dataset; an aggregator in the cloud; rounds of training) and Dataset, seed 001. A Sedna manifest
 * is accepted as written (apiVersion aside): its pod templates are kept whole, and only what the
 * controller reads of them is checked (nodeName, nodeSelector, container env). What Sedna leaves
 * to the training script is typed here, with defaults that keep a Sedna manifest valid: restart
 * policies and backoff per worker (seed 004), the round policy, when to stop, the training
 * parameters, what is cleaned up and when the Model is updated. Parsing fills the defaults in;
 * the CRD only says them (generate.ts), so a stored spec is what was applied.
 *
 * Sedna passes training parameters as container env (batch_size, learning_rate, epochs; the
 * aggregator's exit_round). The typed fields win; the env is the fallback (`trainingParameters`,
 * `maxRounds`), which is why those fields have no zod default.
 */
import { z } from 'zod';
import { condition, dnsSubdomain, modelSpec, restartPolicies } from './schemas.js';

const preserveUnknownFields = { 'x-kubernetes-preserve-unknown-fields': true } as const;
const count = z.number().int().min(0);
const fraction = z.number().min(0).max(1);
const ref = (what: string) =>
  z.object({ name: dnsSubdomain.describe(`A ${what} in the same namespace.`) });

// --- Pod templates: Sedna's PodTemplateSpec, kept whole ------------------------------------------

const envVar = z
  .looseObject({ name: z.string().min(1), value: z.string().optional() })
  .meta(preserveUnknownFields);

const container = z
  .looseObject({
    name: z.string().optional(),
    env: z
      .array(envVar)
      .optional()
      .describe('Sedna passes training parameters here: epochs, batch_size, learning_rate.'),
  })
  .meta(preserveUnknownFields);

const podTemplate = z
  .looseObject({
    spec: z
      .looseObject({
        nodeName: dnsSubdomain.optional().describe('The node the worker runs on.'),
        nodeSelector: z
          .record(z.string(), z.string())
          .optional()
          .describe('Or select nodes by label.'),
        containers: z.array(container).optional(),
      })
      .meta(preserveUnknownFields)
      .optional(),
  })
  .meta(preserveUnknownFields)
  .describe(
    "Sedna's pod template: placement (nodeName, nodeSelector) and container env are read; the rest is kept as written.",
  );

// --- The job ------------------------------------------------------------------------------------

/** Sedna's env names for the training parameters (containers[].env of each worker's template). */
const sednaEnv = {
  epochs: 'epochs',
  batchSize: 'batch_size',
  learningRate: 'learning_rate',
  maxRounds: 'exit_round',
} as const;

const aggregationAlgorithms = [
  'FedAvg',
  'FedProx',
  'FedAdam',
  'FedYogi',
  'FedAdagrad',
  'FedTrimmedAvg',
  'Krum',
  'FedBuff',
] as const;
/** The algorithms whose server step takes the mean of the updates: central DP can wrap them. */
const averagingAlgorithms: ReadonlySet<string> = new Set([
  'FedAvg',
  'FedProx',
  'FedAdam',
  'FedYogi',
  'FedAdagrad',
]);
const cleanPolicies = ['All', 'None'] as const;
const modelUpdatePolicies = ['OnCompletion', 'OnImprovement'] as const;
const roundClosers = ['quorum', 'deadline', 'all'] as const;
const jobPhases = ['Pending', 'Running', 'Succeeded', 'Failed'] as const;
/** The job's conditions: one entry per type, never one per round. */
const federatedLearningConditionTypes = [
  'Created',
  'Running',
  'Restarting',
  'Succeeded',
  'Failed',
  'Ready',
] as const;

/** Defaults of what the schema leaves optional (trainingParameters, maxRounds). */
const trainingDefaults = { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 1 } as const;
const defaultMaxRounds = 10;
const maxTrainingWorkers = 100;

const workerPolicy = {
  restartPolicy: z
    .enum(restartPolicies)
    .default('OnFailure')
    .describe(
      'What a worker failure does: Always and OnFailure restart (OnFailure not after exit 0), Never does not, ExitCode restarts on 128-255 only. Default OnFailure.',
    ),
  backoffLimit: count
    .default(6)
    .describe('Restarts allowed before the worker counts as permanently failed. Default 6.'),
};

/** A count of trainers (1 or more) or a share of them ("60%"): a Kubernetes int-or-string. */
const participantsRule = 'must be a count >= 1 or a percentage 1%-100%';
const participants = z
  .union(
    [
      z.number().int(participantsRule).min(1, participantsRule),
      z.string().regex(/^(100|[1-9][0-9]?)%$/, participantsRule),
    ],
    { error: participantsRule },
  )
  .meta({ 'x-kubernetes-int-or-string': true });

const roundPolicy = z
  .object({
    minParticipants: participants
      .default('100%')
      .describe(
        'Updates a round needs: a count, or a percentage of the trainers not permanently failed (rounded up). Default 100%.',
      ),
    roundTimeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(604_800)
      .default(600)
      .describe('Deadline of a round, from its start. Default 600.'),
    fractionFit: fraction
      .default(1)
      .describe(
        "The share of the trainers a round asks (Flower's fraction_fit): a seeded sample, drawn anew each round; the others are not woken. Default 1.",
      ),
    minFitClients: z
      .number()
      .int()
      .min(1)
      .default(1)
      .describe("At least this many trainers per round (Flower's min_fit_clients). Default 1."),
    acceptFailures: z
      .boolean()
      .default(true)
      .describe(
        'true (default): a round that misses its quorum closes at its deadline with whoever answered (one or more; with none it opens again). false: a round that misses its quorum fails the job.',
      ),
  })
  .prefault({})
  .describe('When a round closes.');

const stopCondition = z
  .object({
    maxRounds: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .optional()
      .describe("Rounds to run; default the aggregator's exit_round env, else 10."),
    targetAccuracy: fraction
      .optional()
      .describe('Stop once the global model reaches this accuracy on the evaluation dataset.'),
    minLossImprovement: z
      .number()
      .min(0)
      .optional()
      .describe('Stop once the loss improves by less than this for `patience` rounds in a row.'),
    patience: z
      .number()
      .int()
      .min(1)
      .max(100_000)
      .default(1)
      .describe('Rounds without minLossImprovement before stopping. Default 1.'),
  })
  .prefault({})
  .describe('When the job ends Succeeded: the first condition met.');

const training = z
  .object({
    epochs: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Local epochs per round; default the epochs env, else 1.'),
    batchSize: count
      .optional()
      .describe('Mini-batch size, 0 for full batch; default the batch_size env, else 10.'),
    learningRate: z
      .number()
      .positive()
      .optional()
      .describe('Default the learning_rate env, else 0.05.'),
    seed: z.number().int().optional().describe('Default 1.'),
  })
  .describe("The trainers' parameters; each one absent falls back to Sedna's env, then a default.");

const decay = z.number().min(0).lt(1);
const aggregation = z
  .object({
    algorithm: z
      .enum(aggregationAlgorithms)
      .default('FedAvg')
      .describe(
        "How a round's updates are combined (Flower's strategies): FedAvg (default), FedProx, FedAdam, FedYogi, FedAdagrad, FedTrimmedAvg, Krum; or FedBuff, asynchronous buffered rounds.",
      ),
    proximalMu: z
      .number()
      .min(0)
      .optional()
      .describe("FedProx: the trainers' proximal term mu. Default 0.01."),
    serverLearningRate: z
      .number()
      .positive()
      .optional()
      .describe(
        "FedAdam, FedYogi, FedAdagrad: the server's learning rate (eta); Flower's defaults. FedBuff: the step on the buffered mean change, default 1.",
      ),
    beta1: decay.optional().describe('FedAdam, FedYogi: first-moment decay. Default 0.9.'),
    beta2: decay.optional().describe('FedAdam, FedYogi: second-moment decay. Default 0.99.'),
    tau: z.number().positive().optional().describe('FedAdam, FedYogi, FedAdagrad: adaptivity.'),
    trimBeta: z
      .number()
      .min(0)
      .lt(0.5)
      .optional()
      .describe('FedTrimmedAvg: the share cut at each end, per coordinate. Default 0.2.'),
    byzantineClients: count
      .optional()
      .describe('Krum: how many updates may be malicious (f). Default 0.'),
    keep: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Krum: updates averaged (1: Krum, more: MultiKrum). Default 1.'),
    bufferSize: z
      .number()
      .int()
      .min(1)
      .optional()
      .describe(
        'FedBuff: the server steps every this many updates, from any trainers (K). Default 5, at most the trainers.',
      ),
    maxStaleness: count
      .optional()
      .describe(
        'FedBuff: an update trained from a model this many versions old still counts; an older one is refused. Default 5.',
      ),
    stalenessExponent: z
      .number()
      .min(0)
      .optional()
      .describe(
        'FedBuff: an update s versions old counts (1 + s)^-a. Default 0.5 (1/sqrt(1 + s)).',
      ),
    privacy: z
      .object({
        noiseMultiplier: z.number().min(0).describe('Noise stdv over the clipping norm (z).'),
        clippingNorm: z
          .number()
          .positive()
          .describe("Each update's change is clipped to this L2 norm."),
        delta: z
          .number()
          .positive()
          .lt(1)
          .default(1e-5)
          .describe('The delta of the (epsilon, delta) reported per round. Default 1e-5.'),
      })
      .optional()
      .describe(
        "Central differential privacy (Flower's server-side fixed clipping): every update's change clipped, Gaussian noise added to the mean, the epsilon spent shown per round. Averaging algorithms only.",
      ),
  })
  .prefault({})
  .describe("How the aggregator combines the trainers' updates.");

const aggregationWorker = z.object({
  model: ref('Model').describe(
    'The model trained: its url holds the initial weights, and the job updates it (modelUpdate).',
  ),
  template: podTemplate,
  ...workerPolicy,
});

const trainingWorker = z.object({
  dataset: ref('Dataset').describe("The trainer's data; it runs on the Dataset's node."),
  template: podTemplate,
  ...workerPolicy,
});

const transmitter = z
  .object({
    ws: z.object({}).optional(),
    s3: z
      .object({
        aggDataPath: z.string().min(1).max(4096),
        credentialName: dnsSubdomain.optional(),
      })
      .optional(),
  })
  .describe("Sedna's data plane between trainers and aggregator; accepted as written.");

type EnvCheck = (value: string) => boolean;
const wholeNumber =
  (min: number): EnvCheck =>
  (value) =>
    /^\s*\d+\s*$/.test(value) && Number(value) >= min && Number.isSafeInteger(Number(value));
const positiveNumber: EnvCheck = (value) =>
  value.trim() !== '' && Number.isFinite(Number(value)) && Number(value) > 0;

/** The Sedna env a worker's template may set, how each must read, and what it must be. */
const trainerEnv: ReadonlyArray<[string, EnvCheck, string]> = [
  [sednaEnv.epochs, wholeNumber(1), 'a whole number >= 1'],
  [sednaEnv.batchSize, wholeNumber(0), 'a whole number >= 0'],
  [sednaEnv.learningRate, positiveNumber, 'a number > 0'],
];
const aggregatorEnv: ReadonlyArray<[string, EnvCheck, string]> = [
  [sednaEnv.maxRounds, wholeNumber(1), 'a whole number >= 1'],
];

type Template = z.output<typeof podTemplate>;

function envIssues(
  template: Template,
  checks: ReadonlyArray<[string, EnvCheck, string]>,
  path: ReadonlyArray<string | number>,
  ctx: z.RefinementCtx,
): void {
  (template.spec?.containers ?? []).forEach((c, ci) =>
    (c.env ?? []).forEach((e, ei) => {
      const check = checks.find(([name]) => name === e.name);
      if (check === undefined || e.value === undefined || check[1](e.value)) return;
      ctx.addIssue({
        code: 'custom',
        message: `${e.name} must be ${check[2]}, not ${JSON.stringify(e.value)}`,
        path: [...path, 'template', 'spec', 'containers', ci, 'env', ei, 'value'],
      });
    }),
  );
}

const federatedLearningJobSpec = z
  .object({
    aggregationWorker: aggregationWorker.describe('The cloud worker that aggregates the updates.'),
    trainingWorkers: z
      .array(trainingWorker)
      .min(1, 'at least one training worker is required')
      .max(maxTrainingWorkers, `at most ${maxTrainingWorkers} training workers`)
      .describe('The edge workers, one per Dataset.'),
    pretrainedModel: ref('Model').optional().describe("Sedna's initial model, if any."),
    transmitter: transmitter.optional(),
    roundPolicy,
    stopCondition,
    training: training.optional(),
    evaluationDataset: ref('Dataset')
      .optional()
      .describe('Where the aggregator measures the global model (accuracy, loss).'),
    aggregation,
    cleanPolicy: z
      .enum(cleanPolicies)
      .default('All')
      .describe(
        "All (default): the trainers' Services are deleted when the job ends; the aggregator's is kept (it serves the models the job produced) and scales to zero. None: all are kept.",
      ),
    modelUpdate: z
      .enum(modelUpdatePolicies)
      .default('OnCompletion')
      .describe(
        "When the aggregationWorker's Model is pointed at the global model: OnCompletion (default) or OnImprovement (each round that beats the best so far).",
      ),
  })
  .superRefine((spec, ctx) => {
    if (spec.stopCondition.targetAccuracy !== undefined && spec.evaluationDataset === undefined)
      ctx.addIssue({
        code: 'custom',
        message: 'targetAccuracy needs an evaluationDataset: accuracy is measured on it',
        path: ['stopCondition', 'targetAccuracy'],
      });
    const firstUse = new Map<string, number>();
    spec.trainingWorkers.forEach((worker, i) => {
      const earlier = firstUse.get(worker.dataset.name);
      if (earlier === undefined) firstUse.set(worker.dataset.name, i);
      else
        ctx.addIssue({
          code: 'custom',
          message: `dataset ${worker.dataset.name} is already used by trainingWorkers[${earlier}]`,
          path: ['trainingWorkers', i, 'dataset', 'name'],
        });
      envIssues(worker.template, trainerEnv, ['trainingWorkers', i], ctx);
    });
    envIssues(spec.aggregationWorker.template, aggregatorEnv, ['aggregationWorker'], ctx);
    if (
      spec.trainingWorkers.length > 0 &&
      spec.roundPolicy.minFitClients > spec.trainingWorkers.length
    )
      ctx.addIssue({
        code: 'custom',
        message: `${spec.roundPolicy.minFitClients} trainers per round asked for, but the job has ${spec.trainingWorkers.length}`,
        path: ['roundPolicy', 'minFitClients'],
      });
    if (
      spec.aggregation.privacy !== undefined &&
      !averagingAlgorithms.has(spec.aggregation.algorithm)
    )
      ctx.addIssue({
        code: 'custom',
        message: `privacy needs an averaging algorithm (its noise is calibrated to a mean), not ${spec.aggregation.algorithm}`,
        path: ['aggregation', 'privacy'],
      });
    const min = spec.roundPolicy.minParticipants;
    if (typeof min === 'number' && min > spec.trainingWorkers.length)
      ctx.addIssue({
        code: 'custom',
        message: `${min} participants asked for, but the job has ${spec.trainingWorkers.length} training worker${spec.trainingWorkers.length === 1 ? '' : 's'}`,
        path: ['roundPolicy', 'minParticipants'],
      });
  });

// --- The job's status ---------------------------------------------------------------------------

const federatedLearningCondition = z.object({
  ...condition.shape,
  type: z.enum(federatedLearningConditionTypes),
});

/** One worker (the aggregator or a trainer) as last reported, and what the controller did. */
const federatedWorkerStatus = z.object({
  dataset: z.string().optional().describe("A trainer's Dataset."),
  node: z.string().optional(),
  state: z
    .string()
    .optional()
    .describe('Last reported state: Pending, Running, Completed, Failed.'),
  lastRound: count.optional().describe('The last round its update was accepted in.'),
  lastSeen: z.string().optional().describe('When it was last heard from.'),
  updatesAccepted: count.optional(),
  updatesRefused: count.optional().describe('Updates refused: late, stale or malformed.'),
  failures: count.optional(),
  restarts: count.optional(),
  exitCode: z
    .number()
    .int()
    .min(0)
    .max(255)
    .optional()
    .describe('The exit code of its last reported failure.'),
  failedGeneration: count
    .optional()
    .describe('The generation whose spec its restart policy stopped it under.'),
  message: z.string().optional(),
  reportTime: z.string().optional(),
  handledReport: z
    .string()
    .optional()
    .describe('The reportTime of the failure already acted on: each failure is handled once.'),
  outcome: z
    .string()
    .optional()
    .describe(
      'Restarted; Recovered once the restarted revision is ready; Permanent when the policy or backoffLimit stops the worker; None otherwise.',
    ),
  restartedAt: z.string().optional(),
});

/** A trainer whose update the aggregation changed or left out; never a value of the update. */
const verdict = z.object({ worker: z.string(), reason: z.string() });

const roundRecord = z.object({
  round: z.number().int().min(1),
  participants: count.describe('Trainers whose update was aggregated.'),
  stragglers: z.array(z.string()).describe('Trainers that had not answered when it closed.'),
  loss: z.number().min(0).optional(),
  accuracy: fraction.optional(),
  durationMs: count,
  closedBy: z
    .enum(roundClosers)
    .describe('quorum: minParticipants answered; deadline: roundTimeoutSeconds; all: everyone.'),
  rejected: z
    .array(verdict)
    .optional()
    .describe('Updates the aggregation left out (Krum), and why.'),
  clipped: z
    .array(verdict)
    .optional()
    .describe('Updates scaled down to the privacy clipping norm.'),
  epsilon: z
    .number()
    .min(0)
    .optional()
    .describe('Central DP: the epsilon spent by the job so far, at the privacy delta.'),
});

const maxHistory = 20;

const federatedLearningJobStatus = z.object({
  conditions: z
    .array(federatedLearningCondition)
    .max(federatedLearningConditionTypes.length)
    .refine((list) => new Set(list.map((c) => c.type)).size === list.length, {
      message: 'one condition per type',
    })
    .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
    .optional(),
  phase: z.enum(jobPhases).optional(),
  startTime: z.string().optional(),
  completionTime: z.string().optional(),
  lastReconcileTime: z.string().optional(),
  observedGeneration: count.optional(),
  round: count.optional().describe('The last completed round.'),
  accuracy: fraction.optional().describe('Of the global model, last evaluated.'),
  loss: z.number().min(0).optional().describe('Of the global model, last evaluated.'),
  activeWorkers: count.optional(),
  workers: z
    .record(z.string(), federatedWorkerStatus)
    .optional()
    .describe('By worker name: the aggregator and each trainer.'),
  history: z
    .array(roundRecord)
    .max(maxHistory)
    .optional()
    .describe(`The last ${maxHistory} rounds, oldest first.`),
  initialModel: z
    .object({ url: modelSpec.shape.url, sha256: z.string().optional() })
    .optional()
    .describe(
      'The model round 1 trains from, pinned when the job first deploys: the job later points its own Model at the models it makes.',
    ),
  globalModel: z
    .object({
      version: count.describe('The round that produced it; 0 for the initial model.'),
      url: modelSpec.shape.url,
      sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex digits'),
    })
    .optional()
    .describe('The latest global model.'),
});

// --- Dataset ------------------------------------------------------------------------------------

const datasetSpec = z.object({
  url: z
    .string()
    .min(1)
    .max(4096)
    .describe("Where the data is on its node: a path or a URL, as Sedna's (file:///...)."),
  format: z
    .string()
    .min(1)
    .max(64)
    .describe("Free-form, as Sedna's (txt, csv, ...); the reference trainer reads csv."),
  nodeName: dnsSubdomain.describe('The node that holds the data; its trainer runs there.'),
  credentialName: dnsSubdomain.optional().describe("Sedna's Secret for remote data, if any."),
});

const datasetStatus = z.object({
  numberOfSamples: count.optional(),
  updateTime: z.string().optional(),
});

// --- Resolving what the spec leaves to Sedna's env -----------------------------------------------

type FederatedLearningJobSpec = z.output<typeof federatedLearningJobSpec>;
type FederatedLearningJobStatus = z.output<typeof federatedLearningJobStatus>;
type DatasetSpec = z.output<typeof datasetSpec>;
type DatasetStatus = z.output<typeof datasetStatus>;
type Participants = z.output<typeof participants>;

interface TrainingParameters {
  epochs: number;
  batchSize: number;
  learningRate: number;
  seed: number;
}

/** The first value of env `name` in a template's containers, as a number, if it reads as one. */
function envNumber(template: Template, name: string, valid: EnvCheck): number | undefined {
  for (const c of template.spec?.containers ?? []) {
    const value = c.env?.find((e) => e.name === name)?.value;
    if (value !== undefined) return valid(value) ? Number(value) : undefined;
  }
  return undefined;
}

/**
 * What training worker `worker` (an index into trainingWorkers, default the first) trains with:
 * each of spec.training's fields, else the Sedna env of that worker's template (epochs,
 * batch_size, learning_rate), else the default (1 epoch, batches of 10, rate 0.05, seed 1).
 */
function trainingParameters(spec: FederatedLearningJobSpec, worker = 0): TrainingParameters {
  const template = spec.trainingWorkers[worker]?.template ?? {};
  const [epochs, batchSize, learningRate] = trainerEnv.map(([name, valid]) =>
    envNumber(template, name, valid),
  );
  return {
    epochs: spec.training?.epochs ?? epochs ?? trainingDefaults.epochs,
    batchSize: spec.training?.batchSize ?? batchSize ?? trainingDefaults.batchSize,
    learningRate: spec.training?.learningRate ?? learningRate ?? trainingDefaults.learningRate,
    seed: spec.training?.seed ?? trainingDefaults.seed,
  };
}

/** Rounds the job runs at most: stopCondition.maxRounds, else the aggregator's exit_round, else 10. */
function maxRounds(spec: FederatedLearningJobSpec): number {
  return (
    spec.stopCondition.maxRounds ??
    envNumber(spec.aggregationWorker.template, sednaEnv.maxRounds, wholeNumber(1)) ??
    defaultMaxRounds
  );
}

/**
 * Updates a round needs out of `eligible` trainers (those not permanently failed): a count as
 * given (it may exceed `eligible`: the quorum cannot be met), a percentage of `eligible` rounded
 * up, at least 1.
 */
function requiredParticipants(minParticipants: Participants, eligible: number): number {
  if (typeof minParticipants === 'number') return minParticipants;
  const percent = Number(minParticipants.slice(0, -1));
  return Math.max(1, Math.ceil((percent * eligible) / 100));
}

export {
  federatedLearningJobSpec,
  federatedLearningJobStatus,
  federatedLearningConditionTypes,
  datasetSpec,
  datasetStatus,
  aggregationAlgorithms,
  cleanPolicies,
  modelUpdatePolicies,
  sednaEnv,
  trainingDefaults,
  trainingParameters,
  maxRounds,
  requiredParticipants,
};
export type {
  FederatedLearningJobSpec,
  FederatedLearningJobStatus,
  DatasetSpec,
  DatasetStatus,
  TrainingParameters,
  Participants,
};
