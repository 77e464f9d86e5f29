/**
 * A Knative Service's status as Knative Serving writes it, from what runs locally: the three
 * conditions (Ready is ConfigurationsReady and RoutesReady together), observedGeneration, the
 * latest created and latest ready revisions, and the URL traffic goes to. Pure.
 */
import type { Phase } from './revision.js';

type ConditionStatus = 'True' | 'False' | 'Unknown';

interface Condition {
  type: 'ConfigurationsReady' | 'Ready' | 'RoutesReady';
  status: ConditionStatus;
  reason?: string;
  message?: string;
  lastTransitionTime: string;
}

interface ServiceView {
  name: string;
  generation: number;
  /** The revision of the newest generation, or why none could be made of the spec. */
  latest:
    | { revision: string; phase: Phase; failure?: string | undefined }
    | { revision: string; invalid: string };
  /** The revision traffic goes to: the newest one that became ready. */
  routed: { revision: string; url: string; up: boolean; failure?: string | undefined } | undefined;
}

interface ServiceStatus {
  observedGeneration: number;
  conditions: Condition[];
  latestCreatedRevisionName: string;
  // null clears what an earlier run of the supervisor wrote (the status is a merge patch).
  latestReadyRevisionName: string | null;
  url: string | null;
  address: { url: string } | null;
  traffic: Array<{ revisionName: string; latestRevision: boolean; percent: number }> | null;
}

type Verdict = { status: ConditionStatus; reason?: string; message?: string };

function failed(revision: string, failure: string | undefined): string {
  return `Revision "${revision}" failed with message: ${failure ?? 'unknown failure'}.`;
}

function configurationsReady(view: ServiceView): Verdict {
  const latest = view.latest;
  if ('invalid' in latest)
    return { status: 'False', reason: 'InvalidSpec', message: latest.invalid };
  if (latest.phase === 'ready' && view.routed?.revision === latest.revision)
    return { status: 'True' };
  if (latest.phase === 'failed')
    return {
      status: 'False',
      reason: 'RevisionFailed',
      message: failed(latest.revision, latest.failure),
    };
  return {
    status: 'Unknown',
    reason: 'RevisionMissing',
    message: `Configuration "${view.name}" is waiting for a Revision to become ready.`,
  };
}

function routesReady(view: ServiceView): Verdict {
  const routed = view.routed;
  if (routed === undefined) {
    const latest = view.latest;
    const hopeless = 'invalid' in latest || latest.phase === 'failed';
    return {
      status: hopeless ? 'False' : 'Unknown',
      reason: 'RevisionMissing',
      message: `Configuration "${view.name}" does not have any ready Revision.`,
    };
  }
  if (routed.up) return { status: 'True' };
  return {
    status: 'False',
    reason: 'RevisionFailed',
    message: failed(routed.revision, routed.failure),
  };
}

function ready(configurations: Verdict, routes: Verdict): Verdict {
  const verdicts = [configurations, routes];
  return (
    verdicts.find((v) => v.status === 'False') ??
    verdicts.find((v) => v.status === 'Unknown') ?? { status: 'True' }
  );
}

/** Seconds precision, as Kubernetes serializes metav1.Time. */
function timestamp(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The status for `view`; a condition keeps its lastTransitionTime from `previous` unless its
 * status flips.
 */
function serviceStatus(
  view: ServiceView,
  previous: readonly Condition[],
  now: Date,
): ServiceStatus {
  const configurations = configurationsReady(view);
  const routes = routesReady(view);
  const verdicts: Array<[Condition['type'], Verdict]> = [
    ['ConfigurationsReady', configurations],
    ['Ready', ready(configurations, routes)],
    ['RoutesReady', routes],
  ];
  const conditions = verdicts.map(([type, verdict]): Condition => {
    const before = previous.find((c) => c.type === type);
    return {
      type,
      status: verdict.status,
      ...(verdict.reason === undefined ? {} : { reason: verdict.reason }),
      ...(verdict.message === undefined ? {} : { message: verdict.message }),
      lastTransitionTime:
        before !== undefined && before.status === verdict.status
          ? before.lastTransitionTime
          : timestamp(now),
    };
  });
  const routed = view.routed;
  return {
    observedGeneration: view.generation,
    conditions,
    latestCreatedRevisionName: view.latest.revision,
    latestReadyRevisionName: routed?.revision ?? null,
    url: routed?.url ?? null,
    address: routed === undefined ? null : { url: routed.url },
    traffic:
      routed === undefined
        ? null
        : [{ revisionName: routed.revision, latestRevision: true, percent: 100 }],
  };
}

/** The conditions a stored status holds (a restarted supervisor keeps their transition times). */
function storedConditions(object: unknown): Condition[] {
  const status = (object as { status?: { conditions?: unknown } } | null)?.status;
  const conditions = status?.conditions;
  if (!Array.isArray(conditions)) return [];
  return conditions.filter(
    (c): c is Condition =>
      typeof c === 'object' &&
      c !== null &&
      typeof (c as Condition).type === 'string' &&
      typeof (c as Condition).status === 'string' &&
      typeof (c as Condition).lastTransitionTime === 'string',
  );
}

export { serviceStatus, storedConditions };
export type { Condition, ServiceStatus, ServiceView };
