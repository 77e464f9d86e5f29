/**
 * What a FederatedLearningJob asks for: its aggregator (a Knative Service running fl-aggregator,
 * the job in FL_JOB_CONFIG) and one trainer per training worker (fl-trainer, pinned to its
 * Dataset's node), built from the spec, its Datasets and Models and the workers the restart
 * policy has stopped for good. Pure, as desired.ts is.
 */
import {
  datasetSpec,
  federatedLearningJobSpec,
  maxRounds,
  modelSpec,
  requiredParticipants,
  trainingParameters,
} from '../crds/index.js';
import type { FederatedLearningJobSpec, FederatedLearningJobStatus } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';
import { fedOptDefaults, sampleSize } from '../messages/federated.js';
import type { FlJobConfig } from '../messages/federated.js';
import { nodeTokenSecret } from '../messages/worker-message.js';
import { dns1035Label } from './desired.js';
import { knativeService, serviceAnnotations } from './knative-service.js';
import type { EnvVar, WorkerSettings } from './knative-service.js';
import type { Policy } from './restart.js';

/** A FederatedLearningJob as stored; `spec` is parsed before use. */
interface FederatedObject extends KubeObject {
  spec?: unknown;
  status?: FederatedLearningJobStatus;
}

/** Labels on the job's Services: one list call finds a job's. */
const federatedLabels = Object.freeze({
  job: 'edgeai.io/federatedlearningjob',
  worker: 'edgeai.io/fl-worker',
  /** aggregator or trainer: what a NetworkPolicy selects (a Dataset may be named anything). */
  role: 'edgeai.io/fl-role',
});

/** The aggregator's worker name in the status and its label. */
const aggregatorWorker = 'aggregator';
/** Knative names a revision `<service>-00001`: the longest Service name, `<job>-aggregator`. */
const maxJobName = 63 - '-00001'.length - `-${aggregatorWorker}`.length;

interface TrainerPlan {
  /** Its Dataset's name: the trainer's name in rounds and in the status. */
  name: string;
  node: string;
  service: KubeObject;
  policy: Policy;
}

type FederatedDesired =
  | {
      valid: false;
      reason: 'InvalidSpec' | 'DatasetNotFound' | 'ModelNotFound';
      message: string;
    }
  | {
      valid: true;
      spec: FederatedLearningJobSpec;
      aggregator: KubeObject;
      aggregatorPolicy: Policy;
      trainers: TrainerPlan[];
      /** Where the aggregator answers: the models it makes are under it. */
      aggregatorUrl: string;
      /** The Model the job trains and, when it is done, updates. */
      model: { name: string; object: KubeObject };
      /**
       * Round 1's model: pinned in the status once deployed, so the job's own Model updates
       * (which point that Model at its aggregator) do not change its aggregator.
       */
      initialModel: { url: string; sha256?: string | undefined };
    };

type Invalid = Extract<FederatedDesired, { valid: false }>;

const clusterUrl = (name: string, namespace: string) =>
  `http://${name}.${namespace}.svc.cluster.local`;

function aggregatorName(job: string): string {
  return `${job}-${aggregatorWorker}`;
}

function trainerName(job: string, index: number): string {
  return `${job}-train-${index}`;
}

function parseJob(job: FederatedObject): FederatedLearningJobSpec | Invalid {
  const name = job.metadata.name;
  if (name.length > maxJobName || !dns1035Label.test(name)) {
    return {
      valid: false,
      reason: 'InvalidSpec',
      message: `metadata.name: "${name}" names the job's Services (${aggregatorName(name)}): at most ${maxJobName} characters, starting with a lowercase letter, of lowercase letters, digits and '-'`,
    };
  }
  const parsed = federatedLearningJobSpec.safeParse(job.spec);
  const named = parsed.success
    ? parsed.data.trainingWorkers.findIndex((w) => w.dataset.name === aggregatorWorker)
    : -1;
  if (named >= 0)
    return {
      valid: false,
      reason: 'InvalidSpec',
      message: `spec.trainingWorkers[${named}].dataset.name: "${aggregatorWorker}" names the job's aggregator in its status; rename the Dataset`,
    };
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map(
    (i) => `spec.${i.path.map(String).join('.')}: ${i.message}`,
  );
  return { valid: false, reason: 'InvalidSpec', message: problems.join('; ') };
}

/** A referenced object's parsed spec, or why not. */
function resolve<T>(
  objects: ReadonlyMap<string, KubeObject>,
  what: 'Dataset' | 'Model',
  name: string,
  field: string,
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
): { spec: T; object: KubeObject } | Invalid {
  const object = objects.get(name);
  const reason = what === 'Dataset' ? 'DatasetNotFound' : 'ModelNotFound';
  if (object === undefined)
    return { valid: false, reason, message: `${what} "${name}" (${field}) not found` };
  const parsed = schema.safeParse(object['spec']);
  if (!parsed.success)
    return {
      valid: false,
      reason: 'InvalidSpec',
      message: `${what} "${name}" (${field}) has an invalid spec`,
    };
  return { spec: parsed.data, object };
}

const isInvalid = (value: object): value is Invalid => 'valid' in value && value.valid === false;

/** The env of a Sedna template's first container: the user's, passed through. */
function userEnv(
  template: FederatedLearningJobSpec['trainingWorkers'][number]['template'],
): EnvVar[] {
  const env = template.spec?.containers?.[0]?.env ?? [];
  return env.flatMap((v) => (v.value === undefined ? [] : [{ name: v.name, value: v.value }]));
}

function nodeTokenEnv(name: string, node: string): EnvVar {
  return {
    name,
    valueFrom: {
      secretKeyRef: { name: nodeTokenSecret.name(node), key: nodeTokenSecret.key, optional: true },
    },
  };
}

interface Planned {
  job: FederatedObject;
  spec: FederatedLearningJobSpec;
  settings: WorkerSettings;
  aggregatorUrl: string;
}

function trainerPlans(
  planned: Planned,
  datasets: ReadonlyMap<string, KubeObject>,
): TrainerPlan[] | Invalid {
  const { job, spec, settings, aggregatorUrl } = planned;
  const plans: TrainerPlan[] = [];
  for (const [i, worker] of spec.trainingWorkers.entries()) {
    const field = `spec.trainingWorkers[${i}].dataset.name`;
    const dataset = resolve(datasets, 'Dataset', worker.dataset.name, field, datasetSpec);
    if (isInvalid(dataset)) return dataset;
    const node = worker.template.spec?.nodeName ?? dataset.spec.nodeName;
    const name = worker.dataset.name;
    const service = knativeService({
      kind: 'federatedLearningJob',
      owner: job,
      name: trainerName(job.metadata.name, i),
      labels: {
        [federatedLabels.job]: job.metadata.name,
        [federatedLabels.worker]: name,
        [federatedLabels.role]: 'trainer',
      },
      clusterLocal: true,
      env: [
        ...userEnv(worker.template),
        { name: 'FUNCTION_TARGET', value: 'fl-trainer' },
        { name: 'FL_JOB', value: `${job.metadata.namespace ?? ''}/${job.metadata.name}` },
        { name: 'FL_WORKER', value: name },
        { name: 'FL_AGGREGATOR_URL', value: aggregatorUrl },
        { name: 'DATASET_URL', value: dataset.spec.url },
        { name: 'DATASET_FORMAT', value: dataset.spec.format },
        { name: 'EDGEAI_NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
        nodeTokenEnv('EDGEAI_NODE_TOKEN', node),
        // The aggregator pushes models up to 8 MiB with the round (FL_INLINE_MODEL_BYTES).
        { name: 'BODY_LIMIT_BYTES', value: String(trainerBodyLimit) },
      ],
      nodeSelector: {
        ...(worker.template.spec?.nodeSelector ?? {}),
        'kubernetes.io/hostname': node,
      },
      // Edge nodes get no Redis credentials: a trainer talks only to its aggregator.
      secret: false,
      // One trainer per Dataset: a second replica would train the same data twice.
      templateAnnotations: { [serviceAnnotations.maxScale]: '1' },
      timeoutSeconds: spec.roundPolicy.roundTimeoutSeconds,
      settings,
    });
    plans.push({ name, node, service, policy: worker });
  }
  return plans;
}

/** A trainer's request limit: a round event carrying a model of FL_INLINE_MODEL_BYTES' default. */
const trainerBodyLimit = 9 * 1024 * 1024;

/** Trainers a round asks, at most the job's (the minimum is capped as FL_JOB_CONFIG caps it). */
const sampled = (n: number, policy: FederatedLearningJobSpec['roundPolicy']) =>
  Math.min(n, sampleSize(n, policy.fractionFit, policy.minFitClients));

const proximalMu = (spec: FederatedLearningJobSpec) => spec.aggregation.proximalMu ?? 0.01;

/** An averaging algorithm with its parameters, Flower's defaults where the spec says nothing. */
function averagingConfig(
  spec: FederatedLearningJobSpec,
): Extract<FlJobConfig['aggregation'], { kind: 'dp-fixed-clipping' }>['inner'] | undefined {
  const a = spec.aggregation;
  const opt = (kind: 'fedadam' | 'fedyogi' | 'fedadagrad') => {
    const defaults = fedOptDefaults[kind];
    return {
      eta: a.serverLearningRate ?? defaults.eta,
      etaL: defaults.etaL,
      tau: a.tau ?? defaults.tau,
    };
  };
  switch (a.algorithm) {
    case 'FedAvg':
      return { kind: 'fedavg' };
    case 'FedProx':
      return { kind: 'fedprox', mu: proximalMu(spec) };
    case 'FedAdam':
    case 'FedYogi': {
      const kind = a.algorithm === 'FedAdam' ? 'fedadam' : 'fedyogi';
      const defaults = fedOptDefaults[kind];
      return {
        kind,
        ...opt(kind),
        beta1: a.beta1 ?? defaults.beta1,
        beta2: a.beta2 ?? defaults.beta2,
      };
    }
    case 'FedAdagrad':
      return { kind: 'fedadagrad', ...opt('fedadagrad') };
    default:
      return undefined;
  }
}

/** spec.aggregation as the aggregator runs it; `sampled`: trainers per round (DP's divisor). */
function aggregationConfig(
  spec: FederatedLearningJobSpec,
  sampled: number,
): FlJobConfig['aggregation'] {
  const a = spec.aggregation;
  const averaging = averagingConfig(spec);
  if (a.algorithm === 'FedBuff') {
    return {
      kind: 'fedbuff',
      bufferSize: a.bufferSize ?? 5,
      maxStaleness: a.maxStaleness ?? 5,
      stalenessExponent: a.stalenessExponent ?? 0.5,
      eta: a.serverLearningRate ?? 1,
    };
  }
  if (averaging === undefined) {
    return a.algorithm === 'Krum'
      ? { kind: 'krum', f: a.byzantineClients ?? 0, m: a.keep ?? 1 }
      : { kind: 'fedtrimmedavg', beta: a.trimBeta ?? 0.2 };
  }
  if (a.privacy === undefined) return averaging;
  const { noiseMultiplier, clippingNorm, delta } = a.privacy;
  return {
    kind: 'dp-fixed-clipping',
    noiseMultiplier,
    clippingNorm,
    delta,
    sampled,
    inner: averaging,
  };
}

/** FL_JOB_CONFIG: the job as its aggregator runs it (shared/messages/federated.ts). */
function jobConfig(
  planned: Planned,
  trainers: readonly TrainerPlan[],
  initial: { url: string; sha256?: string | undefined },
  evaluation: { url: string; format: string } | undefined,
): FlJobConfig {
  const { job, spec, aggregatorUrl } = planned;
  return {
    job: `${job.metadata.namespace ?? ''}/${job.metadata.name}`,
    uid: job.metadata.uid ?? '',
    initialModel: {
      url: initial.url,
      ...(initial.sha256 === undefined ? {} : { sha256: initial.sha256 }),
    },
    trainers: trainers.map((t) => ({
      name: t.name,
      node: t.node,
      url: clusterUrl(t.service.metadata.name, job.metadata.namespace ?? ''),
    })),
    round: {
      minParticipants: requiredParticipants(spec.roundPolicy.minParticipants, trainers.length),
      timeoutMs: spec.roundPolicy.roundTimeoutSeconds * 1000,
      acceptFailures: spec.roundPolicy.acceptFailures,
    },
    stop: {
      maxRounds: maxRounds(spec),
      patience: spec.stopCondition.patience,
      ...(spec.stopCondition.targetAccuracy === undefined
        ? {}
        : { targetAccuracy: spec.stopCondition.targetAccuracy }),
      ...(spec.stopCondition.minLossImprovement === undefined
        ? {}
        : { minLossImprovement: spec.stopCondition.minLossImprovement }),
    },
    training: {
      ...trainingParameters(spec),
      proximalMu: spec.aggregation.algorithm === 'FedProx' ? proximalMu(spec) : 0,
    },
    aggregation: aggregationConfig(spec, sampled(trainers.length, spec.roundPolicy)),
    selection: {
      fraction: spec.roundPolicy.fractionFit,
      minimum: Math.min(spec.roundPolicy.minFitClients, trainers.length),
      seed: trainingParameters(spec).seed,
    },
    ...(evaluation === undefined ? {} : { evaluation }),
    publicUrl: aggregatorUrl,
  };
}

function aggregatorService(
  planned: Planned,
  config: FlJobConfig,
  trainers: readonly TrainerPlan[],
  finished: boolean,
) {
  const { job, settings, spec } = planned;
  const placement = spec.aggregationWorker.template.spec;
  return knativeService({
    kind: 'federatedLearningJob',
    owner: job,
    name: aggregatorName(job.metadata.name),
    // Where Sedna's template puts it (its nodeName, its nodeSelector), if it says.
    nodeSelector: {
      ...(placement?.nodeSelector ?? {}),
      ...(placement?.nodeName === undefined
        ? {}
        : { 'kubernetes.io/hostname': placement.nodeName }),
    },
    labels: {
      [federatedLabels.job]: job.metadata.name,
      [federatedLabels.worker]: aggregatorWorker,
      [federatedLabels.role]: 'aggregator',
    },
    clusterLocal: true,
    env: [
      { name: 'FUNCTION_TARGET', value: 'fl-aggregator' },
      { name: 'FL_JOB_CONFIG', value: JSON.stringify(config) },
      // Updates carry the weights: room for a 64 MiB model and the event around it.
      { name: 'BODY_LIMIT_BYTES', value: String(65 * 1024 * 1024) },
      ...(settings.eventsUrl === undefined
        ? []
        : [{ name: 'FL_EVENTS_URL', value: settings.eventsUrl }]),
      ...trainers.map((t, i) => nodeTokenEnv(`FL_TRAINER_TOKEN_${i}`, t.node)),
    ],
    // The job's process while it trains (its deadlines are timers); scaled to zero once it is done,
    // when it only serves the models it made.
    templateAnnotations: {
      [serviceAnnotations.maxScale]: '1',
      ...(finished ? {} : { [serviceAnnotations.minScale]: '1' }),
    },
    settings,
  });
}

/** The Models and the evaluation Dataset the job names, or the first one missing or invalid. */
function references(
  spec: FederatedLearningJobSpec,
  inputs: { datasets: ReadonlyMap<string, KubeObject>; models: ReadonlyMap<string, KubeObject> },
) {
  const field = 'spec.aggregationWorker.model.name';
  const model = resolve(
    inputs.models,
    'Model',
    spec.aggregationWorker.model.name,
    field,
    modelSpec,
  );
  if (isInvalid(model)) return model;
  const initialName = spec.pretrainedModel?.name;
  const initial =
    initialName === undefined
      ? model
      : resolve(inputs.models, 'Model', initialName, 'spec.pretrainedModel.name', modelSpec);
  if (isInvalid(initial)) return initial;
  const evaluationName = spec.evaluationDataset?.name;
  if (evaluationName === undefined) return { model, initial, evaluation: undefined };
  const dataset = resolve(
    inputs.datasets,
    'Dataset',
    evaluationName,
    'spec.evaluationDataset.name',
    datasetSpec,
  );
  if (isInvalid(dataset)) return dataset;
  return { model, initial, evaluation: { url: dataset.spec.url, format: dataset.spec.format } };
}

/**
 * The job's Services, or the first reason they cannot be built. Trainers the restart policy
 * stopped for good (status.workers[].outcome Permanent) are left out of the aggregator's rounds.
 */
function desiredFederated(
  job: FederatedObject,
  inputs: { datasets: ReadonlyMap<string, KubeObject>; models: ReadonlyMap<string, KubeObject> },
  settings: WorkerSettings,
  finished: boolean,
): FederatedDesired {
  const spec = parseJob(job);
  if (isInvalid(spec)) return spec;
  const namespace = job.metadata.namespace ?? '';
  const aggregatorUrl = clusterUrl(aggregatorName(job.metadata.name), namespace);
  const planned: Planned = { job, spec, settings, aggregatorUrl };
  const refs = references(spec, inputs);
  if (isInvalid(refs)) return refs;
  const { model, initial, evaluation } = refs;
  const modelName = spec.aggregationWorker.model.name;
  const trainers = trainerPlans(planned, inputs.datasets);
  if (isInvalid(trainers)) return trainers;
  const stopped = new Set(
    Object.entries(job.status?.workers ?? {})
      .filter(([, w]) => w.outcome === 'Permanent')
      .map(([name]) => name),
  );
  const active = trainers.filter((t) => !stopped.has(t.name));
  // With none left the job has failed (the decision says so); the config still names them.
  const inRounds = active.length > 0 ? active : trainers;
  const pinned = job.status?.initialModel;
  const initialModel = pinned ?? {
    url: initial.spec.url,
    ...(initial.spec.sha256 === undefined ? {} : { sha256: initial.spec.sha256 }),
  };
  const config = jobConfig(planned, inRounds, initialModel, evaluation);
  return {
    valid: true,
    spec,
    aggregator: aggregatorService(planned, config, inRounds, finished),
    aggregatorPolicy: spec.aggregationWorker,
    trainers,
    aggregatorUrl,
    model: { name: modelName, object: model.object },
    initialModel,
  };
}

export { desiredFederated, federatedLabels, aggregatorWorker };
export type { FederatedDesired, FederatedObject, TrainerPlan };
