/**
 * Seed 004's restart policies applied to a failure a worker reported: restart it (roll a new
 * revision of its Knative Service) or treat the failure as permanent (no new revision, Failed
 * condition until the spec changes or the worker reports Running again).
 */
import type { restartPolicies } from '../crds/index.js';
import type { EventAction } from './actions.js';
import { event } from './actions.js';
import type { KubeObject } from '../k8s/index.js';
import { path, serviceReadiness } from './drift.js';
import { serviceAnnotations } from './knative-service.js';

/** What a worker's status records of its reports and of the restart policy's decisions. */
interface WorkerStatus {
  state?: string | undefined;
  exitCode?: number | undefined;
  message?: string | undefined;
  reportTime?: string | undefined;
  handledReport?: string | undefined;
  outcome?: string | undefined;
  restarts?: number | undefined;
  restartedAt?: string | undefined;
  failedGeneration?: number | undefined;
}

type RestartPolicy = (typeof restartPolicies)[number];
type RestartDecision = 'restart' | 'permanent' | 'none';

/**
 * `state` is the reported state, `exitCode` the process exit status if known. A worker that
 * completed (exit 0) is restarted only under Always; a service is meant to keep running, but
 * OnFailure and Never do not count a clean exit as a failure. Under ExitCode, 1-127 are
 * permanent and 128-255 (signals, OOM kills) retryable; an unknown code is treated as retryable,
 * as the kubelet would.
 */
function restartDecision(
  policy: RestartPolicy,
  state: string,
  exitCode: number | undefined,
): RestartDecision {
  const completed = state === 'Completed' || (state === 'Failed' && exitCode === 0);
  if (completed) return policy === 'Always' ? 'restart' : 'none';
  if (state !== 'Failed') return 'none';
  switch (policy) {
    case 'Always':
    case 'OnFailure':
      return 'restart';
    case 'Never':
      return 'permanent';
    case 'ExitCode':
      return exitCode !== undefined && exitCode >= 1 && exitCode <= 127 ? 'permanent' : 'restart';
  }
}

/**
 * The worker's last report stopped it for good under its policy: a permanent failure, or a clean
 * exit that OnFailure and Never do not restart. Its Service is left alone until the spec changes.
 */
function stopped(status: WorkerStatus): boolean {
  return (
    status.outcome === 'Permanent' || (status.outcome === 'None' && status.state === 'Completed')
  );
}

/** `worker` names it in messages ("edge worker", "trainer edge0"). */
function describeReport(worker: string, status: WorkerStatus): string {
  const code = status.exitCode === undefined ? '' : ` with exit code ${status.exitCode}`;
  const detail = status.message === undefined ? '' : `: ${status.message}`;
  return `${worker} reported ${status.state ?? 'Failed'}${code}${detail}`;
}

/** A worker's restart policy, and how many restarts it allows (none: no limit). */
interface Policy {
  restartPolicy: RestartPolicy;
  backoffLimit?: number;
}

/** What a judgement is made in: the resource's generation, the time, and where events go. */
interface Judging {
  generation: number;
  now: string;
  events: EventAction[];
}

/** The policy's decision, made permanent once the restarts allowed are used up. */
function decide(policy: Policy, status: WorkerStatus): { decision: RestartDecision; why: string } {
  const decision = restartDecision(policy.restartPolicy, status.state ?? '', status.exitCode);
  const limit = policy.backoffLimit;
  if (decision === 'restart' && limit !== undefined && (status.restarts ?? 0) >= limit)
    return { decision: 'permanent', why: `backoffLimit ${limit} reached` };
  return { decision, why: `restartPolicy ${policy.restartPolicy}` };
}

/** The restart policy's decision on a report not handled yet, recorded with its event. */
function applyRestartPolicy<S extends WorkerStatus>(
  worker: string,
  previous: S,
  report: string,
  policy: Policy,
  at: Judging,
): S {
  const { decision, why } = decide(policy, previous);
  const said = `${describeReport(worker, previous)}; ${why}`;
  if (decision === 'restart') {
    at.events.push(event('Warning', 'WorkerRestarted', `${said}: restarting it`));
    return {
      ...previous,
      handledReport: report,
      outcome: 'Restarted',
      restarts: (previous.restarts ?? 0) + 1,
      restartedAt: at.now,
    };
  }
  if (decision === 'permanent')
    at.events.push(event('Warning', 'WorkerFailed', `${said}: not restarting it`));
  return {
    ...previous,
    handledReport: report,
    outcome: decision === 'permanent' ? 'Permanent' : 'None',
    failedGeneration: at.generation,
  };
}

/**
 * Applies the restart policy (none while the spec is invalid) to the worker's last report, once
 * per report: the report's time is recorded as handled, so later passes see the decision rather
 * than make it again. A spec change retries a worker its policy had stopped, once.
 */
function judgeWorker<S extends WorkerStatus>(
  worker: string,
  previous: S,
  policy: Policy | undefined,
  at: Judging,
): S {
  if (policy === undefined) return previous;
  let status = previous;
  const report = previous.reportTime;
  const finished = previous.state === 'Failed' || previous.state === 'Completed';
  if (finished && report !== undefined && report !== previous.handledReport)
    status = applyRestartPolicy(worker, previous, report, policy, at);
  // A spec change may remove the cause of a permanent failure or of an exit: try the new spec once.
  const stillReported = status.handledReport === status.reportTime;
  if (stopped(status) && stillReported && status.failedGeneration !== at.generation) {
    status = {
      ...status,
      outcome: 'Restarted',
      restarts: (status.restarts ?? 0) + 1,
      restartedAt: at.now,
    };
    at.events.push(
      event(
        'Normal',
        'WorkerRetried',
        `spec changed (generation ${at.generation}): retrying the ${worker}`,
      ),
    );
  }
  return status;
}

/**
 * Knative has rolled out and readied the revision that carries the worker's last restart. Cloud
 * workers never report, and edge workers may not, so a new report cannot be what ends a restart.
 */
function restartRolledOut(status: WorkerStatus, stored: KubeObject | undefined): boolean {
  const rolled = path(
    stored,
    'spec',
    'template',
    'metadata',
    'annotations',
    serviceAnnotations.restartedAt,
  );
  return (
    status.restartedAt !== undefined &&
    rolled === status.restartedAt &&
    serviceReadiness(stored).status === 'True'
  );
}

/** `service` as desired, carrying the restart annotation when a restart is recorded. */
function withRestart(service: KubeObject, status: WorkerStatus): KubeObject {
  if (status.restartedAt === undefined) return service;
  const wanted = structuredClone(service);
  const template = (
    wanted['spec'] as { template: { metadata: { annotations: Record<string, string> } } }
  ).template;
  template.metadata.annotations[serviceAnnotations.restartedAt] = status.restartedAt;
  return wanted;
}

export { restartDecision, judgeWorker, describeReport, restartRolledOut, withRestart };
export type { RestartPolicy, RestartDecision, Policy, WorkerStatus };
