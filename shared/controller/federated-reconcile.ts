/**
 * The FederatedLearningJob's decision, pure as reconcile.ts is for JointInferenceServices: the
 * job, the Services it controls and its rounds' progress (the aggregator's, read from the round
 * store) in; the writes that close the gap out. Seed 004's conditions, one per type, updated in
 * place (never one per round); each trainer's failure judged once by its restart policy and
 * backoff limit; the trainers cleaned up when the job ends (cleanPolicy All); the Model updated
 * with the model the job made (modelUpdate).
 */
import type { FederatedLearningJobStatus } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';
import type { RoundSummary } from '../messages/federated.js';
import { changedFields, event, statusAction } from './actions.js';
import type { Action, DecideOptions, EventAction } from './actions.js';
import { mergeConditions, transitionEvents } from './conditions.js';
import type { ConditionState } from './conditions.js';
import { serviceReadiness, workerDrift } from './drift.js';
import type { Readiness } from './drift.js';
import { aggregatorWorker } from './federated-desired.js';
import type { FederatedDesired, FederatedObject, TrainerPlan } from './federated-desired.js';
import { judgeWorker, restartRolledOut, withRestart } from './restart.js';

type WorkerStatus = NonNullable<FederatedLearningJobStatus['workers']>[string];

/** A round as the aggregator recorded it. */
type RoundRecord = RoundSummary;

/** What the round store says of a job (read through the FederatedProgress port). */
interface JobProgress {
  status: 'open' | 'aggregating' | 'done' | 'failed';
  /** Why it ended. */
  message?: string;
  /** The latest model version and its sha256. */
  version: number;
  sha: string;
  /** Newest first. */
  history: readonly RoundRecord[];
  workers: ReadonlyMap<
    string,
    {
      accepted: number;
      refused: number;
      lastRound: number;
      lastSeenMs: number;
      failure?: { atMs: number; round: number; exitCode: number; message: string };
    }
  >;
}

interface FederatedObserved {
  job: FederatedObject;
  /** The Services the job controls, by name. */
  owned: ReadonlyMap<string, KubeObject>;
  taken: readonly string[];
  models: ReadonlyMap<string, KubeObject>;
  progress: JobProgress | undefined;
}

/** The engine's writes, each Service write naming its worker. */
type FederatedAction = Action<{ worker: string }>;

const historyKept = 20;

/** A trainer's status: what the store counted, and its last failure as a report to judge. */
function trainerStatus(
  previous: WorkerStatus,
  plan: TrainerPlan,
  record: JobProgress['workers'] extends ReadonlyMap<string, infer R> ? R | undefined : never,
): WorkerStatus {
  const failure = record?.failure;
  return {
    ...previous,
    dataset: plan.name,
    node: plan.node,
    ...(record === undefined
      ? {}
      : {
          updatesAccepted: record.accepted,
          updatesRefused: record.refused,
          lastRound: record.lastRound,
          ...(record.lastSeenMs > 0 ? { lastSeen: new Date(record.lastSeenMs).toISOString() } : {}),
        }),
    ...(failure === undefined
      ? {}
      : {
          state: 'Failed',
          exitCode: failure.exitCode,
          message: failure.message,
          reportTime: new Date(failure.atMs).toISOString(),
        }),
  };
}

/** The create or update that makes the stored Service the wanted one, if anything differs. */
function serviceWrite(
  worker: string,
  wanted: KubeObject,
  stored: KubeObject | undefined,
): { action: FederatedAction; rollingOut: boolean } | undefined {
  if (stored === undefined)
    return { action: { kind: 'create', worker, object: wanted }, rollingOut: true };
  const drift = workerDrift(stored, wanted);
  if (drift === undefined) return undefined;
  const { name } = stored.metadata;
  return {
    action: { kind: 'update', worker, name, patch: drift.patch },
    rollingOut: drift.specChanged,
  };
}

const deploying: Readiness = {
  status: 'Unknown',
  reason: 'Deploying',
  message: 'latest spec not yet rolled out',
};

interface WorkerPlanned {
  name: string;
  status: WorkerStatus;
  readiness: Readiness;
  write?: FederatedAction;
  events: EventAction[];
}

interface Context {
  observed: FederatedObserved;
  desired: Extract<FederatedDesired, { valid: true }>;
  finished: boolean;
  generation: number;
  nowIso: string;
}

/** One trainer: its failures judged, its Service written (or deleted once the job is over). */
function planTrainer(context: Context, plan: TrainerPlan): WorkerPlanned {
  const { observed, desired, finished } = context;
  const previous = observed.job.status?.workers?.[plan.name] ?? {};
  const events: EventAction[] = [];
  const record = observed.progress?.workers.get(plan.name);
  const at = { generation: context.generation, now: context.nowIso, events };
  let status = judgeWorker(
    `trainer ${plan.name}`,
    trainerStatus(previous, plan, record),
    plan.policy,
    at,
  );
  const stored = observed.owned.get(plan.service.metadata.name);
  if (status.outcome === 'Restarted' && restartRolledOut(status, stored))
    status = { ...status, outcome: 'Recovered' };
  const base = { name: plan.name, status, events, readiness: serviceReadiness(stored) };
  if (finished && desired.spec.cleanPolicy === 'All') {
    if (stored === undefined) return base;
    const write: FederatedAction = { kind: 'delete', name: stored.metadata.name };
    events.push(
      event(
        'Normal',
        'TrainerCleaned',
        `the job ended: deleted trainer ${plan.name}'s Service (cleanPolicy All)`,
      ),
    );
    return { ...base, write };
  }
  if (status.outcome === 'Permanent') return base;
  const change = serviceWrite(plan.name, withRestart(plan.service, status), stored);
  if (change === undefined) return base;
  return { ...base, write: change.action, ...(change.rollingOut ? { readiness: deploying } : {}) };
}

function planAggregator(context: Context): WorkerPlanned {
  const { observed, desired } = context;
  const stored = observed.owned.get(desired.aggregator.metadata.name);
  const previous = observed.job.status?.workers?.[aggregatorWorker] ?? {};
  const base = {
    name: aggregatorWorker,
    status: previous,
    events: [],
    readiness: serviceReadiness(stored),
  };
  const change = serviceWrite(aggregatorWorker, desired.aggregator, stored);
  if (change === undefined) return base;
  return { ...base, write: change.action, ...(change.rollingOut ? { readiness: deploying } : {}) };
}

/** What a worker's status shows. */
function shownState(planned: WorkerPlanned, finished: boolean): string {
  if (planned.status.outcome === 'Permanent') return 'Failed';
  if (planned.status.outcome === 'Restarted') return 'Restarting';
  if (finished) return 'Completed';
  if (planned.readiness.status === 'True') return 'Running';
  if (planned.readiness.status === 'False') return 'NotReady';
  return 'Pending';
}

type Status = ConditionState['status'];
const condition = (type: ConditionState['type'], status: Status, reason: string, message = '') => ({
  type,
  status,
  reason,
  message,
});

/** The job's end as the round store tells it, or a job with no trainer left. */
function outcome(context: Context, trainers: readonly WorkerPlanned[]) {
  const progress = context.observed.progress;
  if (progress?.status === 'done') return { succeeded: progress.message ?? 'stop condition met' };
  if (progress?.status === 'failed') return { failed: progress.message ?? 'a round failed' };
  if (trainers.length > 0 && trainers.every((t) => t.status.outcome === 'Permanent'))
    return { failed: 'every trainer has failed for good (restartPolicy or backoffLimit)' };
  return {};
}

/** Seed 004's conditions, Ready summing them up. */
function conditionsFor(
  context: Context,
  workers: { aggregator: WorkerPlanned; trainers: readonly WorkerPlanned[] },
): ConditionState[] {
  const { observed } = context;
  const ended = outcome(context, workers.trainers);
  const taken = observed.taken;
  const created =
    taken.length > 0
      ? condition(
          'Created',
          'False',
          'WorkerNameTaken',
          `Knative Service ${taken.join(', ')} exists and is not this job's: delete or rename it`,
        )
      : condition('Created', 'True', 'WorkersCreated', 'the aggregator and the trainers exist');
  const restarting = workers.trainers.filter((t) => t.status.outcome === 'Restarted');
  const running = runningCondition(context, workers.aggregator, ended);
  const succeeded =
    ended.succeeded === undefined
      ? condition('Succeeded', 'False', 'NotFinished')
      : condition('Succeeded', 'True', 'StopConditionMet', ended.succeeded);
  const failed =
    ended.failed === undefined
      ? condition('Failed', 'False', 'NoFailure')
      : condition('Failed', 'True', 'TrainingFailed', ended.failed);
  const ready =
    failed.status === 'True'
      ? { ...failed, type: 'Ready' as const, status: 'False' as const }
      : created.status === 'False'
        ? { ...created, type: 'Ready' as const }
        : { ...(succeeded.status === 'True' ? succeeded : running), type: 'Ready' as const };
  return [
    ready,
    created,
    running,
    restarting.length === 0
      ? condition('Restarting', 'False', 'NotRestarting')
      : condition(
          'Restarting',
          'True',
          'TrainerRestarted',
          `trainer ${restarting.map((t) => t.name).join(', ')} restarting`,
        ),
    succeeded,
    failed,
  ];
}

function runningCondition(
  context: Context,
  aggregator: WorkerPlanned,
  ended: { succeeded?: string; failed?: string },
): ConditionState {
  if (ended.succeeded !== undefined || ended.failed !== undefined)
    return condition('Running', 'False', 'Finished', 'the job has ended');
  if (aggregator.readiness.status !== 'True')
    return condition(
      'Running',
      aggregator.readiness.status === 'False' ? 'False' : 'Unknown',
      'AggregatorNotReady',
      `aggregator: ${aggregator.readiness.reason} ${aggregator.readiness.message}`.trim(),
    );
  const rounds = context.observed.progress?.history[0]?.round ?? 0;
  return condition('Running', 'True', 'Training', `${rounds} round(s) completed`);
}

function phaseOf(
  conditions: readonly ConditionState[],
): NonNullable<FederatedLearningJobStatus['phase']> {
  const is = (type: ConditionState['type']) =>
    conditions.find((c) => c.type === type)?.status === 'True';
  if (is('Failed')) return 'Failed';
  if (is('Succeeded')) return 'Succeeded';
  if (is('Running')) return 'Running';
  return 'Pending';
}

/** The round summaries as the status keeps them: oldest first, the last 20. */
function historyOf(progress: JobProgress | undefined): FederatedLearningJobStatus['history'] {
  return [...(progress?.history ?? [])]
    .slice(0, historyKept)
    .reverse()
    .map((r) => ({
      round: r.round,
      participants: r.participants,
      stragglers: r.stragglers,
      durationMs: r.durationMs,
      closedBy: r.closedBy,
      ...(r.loss === undefined ? {} : { loss: r.loss }),
      ...(r.accuracy === undefined ? {} : { accuracy: r.accuracy }),
      ...(r.rejected === undefined ? {} : { rejected: r.rejected }),
      ...(r.clipped === undefined ? {} : { clipped: r.clipped }),
      ...(r.epsilon === undefined ? {} : { epsilon: r.epsilon }),
    }));
}

/** The model version the job publishes now (modelUpdate), or none yet. */
function published(
  context: Context,
  finished: boolean,
): { version: number; sha256: string } | undefined {
  const { progress } = context.observed;
  if (progress === undefined || progress.version === 0) return undefined;
  const latest = { version: progress.version, sha256: progress.sha };
  if (context.desired.spec.modelUpdate === 'OnCompletion')
    return finished && progress.status === 'done' ? latest : undefined;
  // OnImprovement: the latest version, once it is the most accurate so far (the store gives the
  // latest version's digest; an older best one was published when it was the latest).
  const accuracies = progress.history.map((r) => r.accuracy ?? -1);
  const best = Math.max(...accuracies);
  const newest = progress.history[0];
  if (newest === undefined || (newest.accuracy ?? -1) < best) return undefined;
  return latest;
}

/** The Model patch that makes it serve `model`, if it does not already. */
function modelUpdate(
  context: Context,
  model: { version: number; sha256: string } | undefined,
): FederatedAction[] {
  if (model === undefined) return [];
  const { desired } = context;
  const url = `${desired.aggregatorUrl}/v1/models/${model.version}`;
  const current = desired.model.object['spec'] as { url?: unknown; sha256?: unknown } | undefined;
  if (current?.url === url && current.sha256 === model.sha256) return [];
  return [
    {
      kind: 'patchModel',
      name: desired.model.name,
      patch: { spec: { url, sha256: model.sha256 } },
    },
    event(
      'Normal',
      'ModelUpdated',
      `Model ${desired.model.name} now serves version ${model.version} (${url})`,
    ),
  ];
}

function statusFields(
  context: Context,
  workers: { aggregator: WorkerPlanned; trainers: readonly WorkerPlanned[] },
  conditions: readonly ConditionState[],
): FederatedLearningJobStatus {
  const { observed, nowIso, finished } = context;
  const previous = observed.job.status ?? {};
  const progress = observed.progress;
  const last = progress?.history[0];
  const phase = phaseOf(conditions);
  const all = [workers.aggregator, ...workers.trainers];
  return {
    observedGeneration: context.generation,
    phase,
    startTime: previous.startTime ?? nowIso,
    initialModel: previous.initialModel ?? context.desired.initialModel,
    ...(phase === 'Succeeded' || phase === 'Failed'
      ? { completionTime: previous.completionTime ?? nowIso }
      : {}),
    round: last?.round ?? 0,
    ...(last?.accuracy === undefined ? {} : { accuracy: last.accuracy }),
    ...(last?.loss === undefined ? {} : { loss: last.loss }),
    activeWorkers: workers.trainers.filter((t) => shownState(t, finished) === 'Running').length,
    workers: Object.fromEntries(
      all.map((w) => [w.name, { ...w.status, state: shownState(w, finished) }]),
    ),
    history: historyOf(progress),
    ...globalModel(context),
  };
}

/** The latest model the job made, once it has made one. */
function globalModel(context: Context): Pick<FederatedLearningJobStatus, 'globalModel'> {
  const progress = context.observed.progress;
  if (progress === undefined || progress.version === 0) return {};
  const url = `${context.desired.aggregatorUrl}/v1/models/${progress.version}`;
  return { globalModel: { version: progress.version, url, sha256: progress.sha } };
}

/** An invalid job changes nothing: its Services keep what they run; the status says why. */
function invalidJob(
  observed: FederatedObserved,
  desired: Extract<FederatedDesired, { valid: false }>,
  now: Date,
  options: DecideOptions,
): FederatedAction[] {
  const previous = observed.job.status ?? {};
  const states = [
    condition('Ready', 'False', desired.reason, desired.message),
    condition('Created', 'False', desired.reason, desired.message),
  ];
  const conditions = mergeConditions(previous.conditions, states, now.toISOString());
  const patch = changedFields(previous, {
    observedGeneration: observed.job.metadata.generation ?? 0,
    phase: previous.phase ?? 'Pending',
    conditions,
  });
  const status = statusAction(observed.job, patch, now, options);
  return [
    ...(status === undefined ? [] : [status]),
    ...transitionEvents(previous.conditions, states),
  ];
}

/** The writes that make the stored state match the desired one (see the file comment). */
function reconcileFederated(
  observed: FederatedObserved,
  desired: FederatedDesired,
  now: Date,
  options: DecideOptions,
): FederatedAction[] {
  if (!desired.valid) return invalidJob(observed, desired, now, options);
  const progress = observed.progress;
  // Ended: the store says so, or every trainer has failed for good (as the registration sees it).
  const stopped = desired.trainers.filter(
    (t) => observed.job.status?.workers?.[t.name]?.outcome === 'Permanent',
  );
  const finished =
    progress?.status === 'done' ||
    progress?.status === 'failed' ||
    (desired.trainers.length > 0 && stopped.length === desired.trainers.length);
  const context: Context = {
    observed,
    desired,
    finished,
    generation: observed.job.metadata.generation ?? 0,
    nowIso: now.toISOString(),
  };
  const trainers = desired.trainers.map((plan) => planTrainer(context, plan));
  const aggregator = planAggregator(context);
  const workers = { aggregator, trainers };
  const states = conditionsFor(context, workers);
  const previous = observed.job.status ?? {};
  const conditions = mergeConditions(previous.conditions, states, context.nowIso);
  const fields = statusFields(
    { ...context, finished: finished || phaseOf(states) === 'Failed' },
    workers,
    states,
  );
  const status = statusAction(
    observed.job,
    changedFields(previous, { ...fields, conditions }),
    now,
    options,
  );
  const writes = [aggregator, ...trainers].flatMap((w) => (w.write === undefined ? [] : [w.write]));
  return [
    ...(status === undefined ? [] : [status]),
    ...writes,
    ...modelUpdate(context, published(context, finished)),
    ...[aggregator, ...trainers].flatMap((w) => w.events),
    ...writes.flatMap((w) => serviceEvent(w, context.generation)),
    ...transitionEvents(previous.conditions, states),
  ];
}

function serviceEvent(action: FederatedAction, generation: number): EventAction[] {
  if (action.kind === 'create')
    return [
      event(
        'Normal',
        'WorkerCreated',
        `created ${action.worker}'s Service ${action.object.metadata.name}`,
      ),
    ];
  if (action.kind === 'update')
    return [
      event(
        'Normal',
        'WorkerUpdated',
        `updated ${action.worker}'s Service ${action.name} to generation ${generation}`,
      ),
    ];
  return [];
}

export { reconcileFederated };
export type { FederatedObserved, FederatedAction, JobProgress, RoundRecord };
