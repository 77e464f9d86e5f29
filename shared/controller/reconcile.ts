/**
 * The decision of the reconcile-tick controller, as a pure function: what is stored (the
 * JointInferenceService and the worker Services it owns) and what is wanted (desired.ts) in,
 * the writes that close the gap out. No write when nothing differs: that is what keeps a tick
 * over a thousand services free, and what stops the status writes the reconciler makes from
 * waking it up forever through its own ApiServerSource.
 */
import { isDeepStrictEqual } from 'node:util';
import type { JointInferenceServiceStatus } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';
import { changedFields, statusAction } from './actions.js';
import type { Action as EngineAction, DecideOptions, EventAction } from './actions.js';
import { findCondition, mergeConditions, transitionEvents } from './conditions.js';
import type { ConditionState } from './conditions.js';
import type { Desired } from './desired.js';
import { describeReport, judgeWorker, restartRolledOut, withRestart } from './restart.js';
import { serviceReadiness, workerDrift } from './drift.js';
import type { Readiness } from './drift.js';
import { roles, workerName } from './types.js';
import type { Role, ServiceObject, WorkerStatus } from './types.js';

interface Observed {
  service: ServiceObject;
  /** The worker Services it controls (ownership.ts). */
  workers: Partial<Record<Role, KubeObject>>;
  /**
   * Roles whose worker name is held by a Knative Service that is not this service's worker
   * (created by someone else): creating it would fail on every pass, so the status says why.
   */
  taken?: readonly Role[];
}

/** The engine's writes, each worker write naming its role. */
type Action = EngineAction<{ role: Role }>;

interface WorkerView {
  status: WorkerStatus;
  permanent: boolean;
  restarting: boolean;
  completed: boolean;
  readiness: Readiness;
  state: string;
  /** The worker's name is held by someone else's Knative Service. */
  taken: boolean;
}

/** The state a worker's status shows, the first that holds. */
function workerState(
  view: Pick<WorkerView, 'permanent' | 'restarting' | 'completed' | 'taken' | 'readiness'>,
  absent: boolean,
): string {
  if (view.permanent) return 'Failed';
  if (view.restarting) return 'Restarting';
  if (view.completed) return 'Completed';
  if (view.taken) return 'NameTaken';
  if (absent) return 'Absent';
  if (view.readiness.status === 'True') return 'Running';
  if (view.readiness.status === 'False') return 'NotReady';
  return 'Pending';
}

/** `written`: the worker is created or updated in this pass, so it is not rolled out yet. */
function viewWorker(
  status: WorkerStatus,
  stored: KubeObject | undefined,
  written = false,
  taken = false,
): WorkerView {
  const noNewReport =
    status.handledReport !== undefined && status.handledReport === status.reportTime;
  const flags = {
    permanent: status.outcome === 'Permanent' && noNewReport,
    restarting: status.outcome === 'Restarted' && noNewReport,
    completed: status.outcome === 'None' && noNewReport && status.state === 'Completed',
    taken,
    readiness: written
      ? ({
          status: 'Unknown',
          reason: 'Deploying',
          message: 'latest spec not yet rolled out',
        } as const)
      : serviceReadiness(stored),
  };
  return { status, ...flags, state: workerState(flags, stored === undefined && !written) };
}

/** One role's view, for the conditions that list the roles they are about. */
type RoleView = { role: Role; view: WorkerView };

const listRoles = (items: readonly RoleView[], text: (role: Role, view: WorkerView) => string) =>
  items.map(({ role, view }) => text(role, view)).join('; ');

function createdCondition(
  desired: Desired,
  taken: readonly RoleView[],
  serviceName: string,
): ConditionState {
  if (!desired.valid)
    return { type: 'Created', status: 'False', reason: desired.reason, message: desired.message };
  if (taken.length > 0) {
    return {
      type: 'Created',
      status: 'False',
      reason: 'WorkerNameTaken',
      message: listRoles(
        taken,
        (r) =>
          `Knative Service "${workerName(serviceName, r)}" (the ${r} worker's name) exists and is not this service's worker: delete or rename it`,
      ),
    };
  }
  return {
    type: 'Created',
    status: 'True',
    reason: 'WorkersCreated',
    message: 'edge and cloud workers exist',
  };
}

function runningCondition(running: boolean, notReady: readonly RoleView[]): ConditionState {
  if (running)
    return {
      type: 'Running',
      status: 'True',
      reason: 'WorkersReady',
      message: 'both workers are ready',
    };
  if (notReady.length > 0) {
    return {
      type: 'Running',
      status: 'False',
      reason: 'WorkerNotReady',
      message: listRoles(notReady, (r, v) =>
        `${r} worker: ${v.readiness.reason} ${v.readiness.message}`.trim(),
      ),
    };
  }
  return {
    type: 'Running',
    status: 'Unknown',
    reason: 'Deploying',
    message: 'waiting for the workers to become ready',
  };
}

function failedCondition(failed: readonly RoleView[]): ConditionState {
  if (failed.length === 0)
    return { type: 'Failed', status: 'False', reason: 'NoFailure', message: '' };
  return {
    type: 'Failed',
    status: 'True',
    reason: failed.some(({ view }) => view.permanent) ? 'PermanentFailure' : 'WorkerCompleted',
    message: listRoles(
      failed,
      (r, v) => `${describeReport(`${r} worker`, v.status)}; not restarted by its restartPolicy`,
    ),
  };
}

function restartingCondition(restarting: readonly RoleView[]): ConditionState {
  if (restarting.length === 0)
    return { type: 'Restarting', status: 'False', reason: 'NotRestarting', message: '' };
  return {
    type: 'Restarting',
    status: 'True',
    reason: 'WorkerRestarted',
    message: listRoles(
      restarting,
      (r, v) =>
        `${r} worker restarted ${v.status.restarts ?? 1} time(s), last at ${v.status.restartedAt ?? ''}`,
    ),
  };
}

function degradedCondition(views: Record<Role, WorkerView>): ConditionState {
  const degraded =
    views.edge.readiness.status === 'True' && views.cloud.readiness.status !== 'True';
  return degraded
    ? {
        type: 'Degraded',
        status: 'True',
        reason: 'CloudWorkerUnavailable',
        message: 'the edge answers alone: hard examples get the configured fallback',
      }
    : { type: 'Degraded', status: 'False', reason: 'NotDegraded', message: '' };
}

/** Ready sums up the others, the first trouble first: not created, failed, restarting, not running. */
function readyCondition(
  created: ConditionState,
  failed: ConditionState,
  restarting: ConditionState,
  running: ConditionState,
): ConditionState {
  if (created.status === 'False') return { ...created, type: 'Ready' };
  if (failed.status === 'True') return { ...failed, type: 'Ready', status: 'False' };
  if (restarting.status === 'True')
    return { ...restarting, type: 'Ready', status: 'False', reason: 'WorkerRestarting' };
  if (running.status === 'True')
    return {
      type: 'Ready',
      status: 'True',
      reason: 'Ready',
      message: 'edge and cloud workers are serving',
    };
  return { ...running, type: 'Ready', status: running.status === 'False' ? 'False' : 'Unknown' };
}

function conditionsFor(
  desired: Desired,
  views: Record<Role, WorkerView>,
  serviceName: string,
): ConditionState[] {
  const all: RoleView[] = roles.map((role) => ({ role, view: views[role] }));
  const created = createdCondition(
    desired,
    all.filter(({ view }) => view.taken),
    serviceName,
  );
  const running = runningCondition(
    all.every(({ view }) => view.readiness.status === 'True'),
    all.filter(({ view }) => view.readiness.status === 'False'),
  );
  const failed = failedCondition(all.filter(({ view }) => view.permanent || view.completed));
  const restarting = restartingCondition(all.filter(({ view }) => view.restarting));
  return [
    readyCondition(created, failed, restarting, running),
    created,
    running,
    restarting,
    failed,
    degradedCondition(views),
  ];
}

/** A figure for a message: three significant digits, whole numbers from 100 up. */
function figure(value: number): string {
  return String(Math.abs(value) >= 100 ? Math.round(value) : Number(value.toPrecision(3)));
}

/**
 * DataDrift from the edge's latest drift test, or none while it never reported one. Information
 * only: a drifting input stream is still served, so Ready does not look at it. Once set, a report
 * without a drift test (the detector turned off) makes it Unknown rather than leaving it stale.
 */
function driftCondition(status: JointInferenceServiceStatus): ConditionState | undefined {
  const quality = status.quality;
  if (quality?.driftScore === undefined) {
    return findCondition(status.conditions, 'DataDrift') === undefined
      ? undefined
      : {
          type: 'DataDrift',
          status: 'Unknown',
          reason: 'NoDriftReport',
          message: 'the edge worker no longer reports a drift test',
        };
  }
  const score = quality.driftScore;
  const threshold = quality.driftThreshold;
  let message = `drift score ${figure(score)}`;
  if (threshold !== undefined) {
    const side = score > threshold ? 'above' : score < threshold ? 'below' : 'at';
    message += ` ${side} threshold ${figure(threshold)}`;
  }
  if (quality.driftWindow !== undefined) message += ` over the last ${quality.driftWindow} inputs`;
  if (quality.outlierShare !== undefined)
    message += ` (outlier share ${figure(quality.outlierShare)})`;
  return quality.drifting === true
    ? { type: 'DataDrift', status: 'True', reason: 'InputDrift', message }
    : { type: 'DataDrift', status: 'False', reason: 'NoDrift', message };
}

/** One role's decision: its recorded status, how it shows, its worker write and its events. */
interface WorkerPlan {
  status: WorkerStatus;
  view: WorkerView;
  write?: Action;
  events: Action[];
}

/**
 * The create or update that makes a role's stored worker Service the wanted one, with its event,
 * and whether it starts a rollout (a worker created, or whose spec changes, is not rolled out).
 */
function workerWrite(
  role: Role,
  wanted: KubeObject,
  stored: KubeObject | undefined,
  previous: JointInferenceServiceStatus,
  generation: number,
): { write: Action; event: Action; rollingOut: boolean } | undefined {
  if (stored === undefined) {
    const recreated = findCondition(previous.conditions, 'Created')?.status === 'True';
    return {
      write: { kind: 'create', role, object: wanted },
      rollingOut: true,
      event: {
        kind: 'event',
        type: recreated ? 'Warning' : 'Normal',
        reason: recreated ? 'WorkerRecreated' : 'WorkerCreated',
        message: `${recreated ? 'recreated the missing' : 'created the'} ${role} worker Service ${wanted.metadata.name}`,
      },
    };
  }
  const drift = workerDrift(stored, wanted);
  if (drift === undefined) return undefined;
  return {
    write: { kind: 'update', role, name: stored.metadata.name, patch: drift.patch },
    rollingOut: drift.specChanged,
    event: {
      kind: 'event',
      type: 'Normal',
      reason: 'WorkerUpdated',
      message: `updated the ${role} worker Service ${stored.metadata.name} to generation ${generation}`,
    },
  };
}

/** The role's recorded status after its restart policy and its rollout have had their say. */
function judgedStatus(
  role: Role,
  observed: Observed,
  desired: Desired,
  at: { generation: number; now: string; events: EventAction[] },
): WorkerStatus {
  const worker = observed.service.status?.workers?.[role] ?? {};
  const policy = desired.valid ? { restartPolicy: desired.policies[role] } : undefined;
  const status = judgeWorker(`${role} worker`, worker, policy, at);
  // Recorded, not derived from the Service's readiness, so that a later rollout or a worker
  // that is not ready for another reason does not show as restarting again.
  return status.outcome === 'Restarted' && restartRolledOut(status, observed.workers[role])
    ? { ...status, outcome: 'Recovered' }
    : status;
}

function planWorker(
  role: Role,
  observed: Observed,
  desired: Desired,
  generation: number,
  nowIso: string,
): WorkerPlan {
  const previous = observed.service.status ?? {};
  const events: EventAction[] = [];
  const status = judgedStatus(role, observed, desired, { generation, now: nowIso, events });
  const stored = observed.workers[role];
  const taken = stored === undefined && (observed.taken?.includes(role) ?? false);
  const view = viewWorker(status, stored, false, taken);
  if (!desired.valid || view.permanent || view.completed || taken) return { status, view, events };
  const change = workerWrite(
    role,
    withRestart(desired.workers[role], status),
    stored,
    previous,
    generation,
  );
  if (change === undefined) return { status, view, events };
  return {
    status,
    view: change.rollingOut ? viewWorker(status, stored, true) : view,
    write: change.write,
    events: [...events, change.event],
  };
}

/** The status fields that differ from what is stored (an empty object when none does). */
function statusPatch(
  previous: JointInferenceServiceStatus,
  wanted: JointInferenceServiceStatus,
  conditions: JointInferenceServiceStatus['conditions'],
  statuses: Record<Role, WorkerStatus>,
): Record<string, unknown> {
  const patch = changedFields(previous, { ...wanted, conditions });
  const workersPatch: Record<string, WorkerStatus> = {};
  for (const role of roles) {
    if (!isDeepStrictEqual(previous.workers?.[role] ?? {}, statuses[role]))
      workersPatch[role] = statuses[role];
  }
  if (Object.keys(workersPatch).length > 0) patch['workers'] = workersPatch;
  return patch;
}

/** The writes that make the stored state match the desired one (see the file comment). */
function reconcile(
  observed: Observed,
  desired: Desired,
  now: Date,
  options: DecideOptions,
): Action[] {
  const nowIso = now.toISOString();
  const { service } = observed;
  const previous = service.status ?? {};
  const generation = service.metadata.generation ?? 0;
  const plans = {} as Record<Role, WorkerPlan>;
  for (const role of roles) plans[role] = planWorker(role, observed, desired, generation, nowIso);
  const views = { edge: plans.edge.view, cloud: plans.cloud.view };
  const statuses = { edge: plans.edge.status, cloud: plans.cloud.status };
  const drift = driftCondition(previous);
  const conditionStates = [
    ...conditionsFor(desired, views, service.metadata.name),
    ...(drift === undefined ? [] : [drift]),
  ];
  const wanted: JointInferenceServiceStatus = {
    observedGeneration: generation,
    startTime: previous.startTime ?? nowIso,
    edgeWorkerState: views.edge.state,
    cloudWorkerState: views.cloud.state,
    activeWorkers: roles.filter((r) => views[r].state === 'Running').length,
    failedWorkers: roles.filter((r) => views[r].permanent).length,
  };
  const conditions = mergeConditions(previous.conditions, conditionStates, nowIso);
  const status = statusAction(
    service,
    statusPatch(previous, wanted, conditions, statuses),
    now,
    options,
  );
  const actions: Action[] = status === undefined ? [] : [status];
  // Applied in this order (apply.ts): the status first (a conflict stops the pass before any
  // other write), then the workers, then the events that tell of them.
  for (const role of roles) if (plans[role].write !== undefined) actions.push(plans[role].write);
  for (const role of roles) actions.push(...plans[role].events);
  actions.push(...transitionEvents(previous.conditions, conditionStates));
  return actions;
}

export { reconcile };
export type { Action, Observed };
