/**
 * The MLGraph controller's decision, pure as reconcile.ts is for JointInferenceServices: the
 * graph and the Services found for it in, the writes that close the gap out. Nothing is written
 * when nothing differs, so the status writes it makes do not wake it up forever through its own
 * ApiServerSource.
 */
import type { KubeObject } from '../k8s/index.js';
import { changedFields, event, statusAction } from './actions.js';
import type { Action, DecideOptions } from './actions.js';
import { mergeConditions, transitionEvents } from './conditions.js';
import type { ConditionState } from './conditions.js';
import { serviceReadiness, workerDrift } from './drift.js';
import type { Readiness } from './drift.js';
import { executorNode, graphLabels, storedNodeCount } from './graph-desired.js';
import type { GraphDesired, GraphObject, MLGraphStatus } from './graph-desired.js';
import { controlledBy } from './ownership.js';

interface GraphObserved {
  graph: GraphObject;
  /** The Knative Services it controls (ownership.ts), by name. */
  services: ReadonlyMap<string, KubeObject>;
  /**
   * Service names the graph wants that a Knative Service it does not control holds (someone
   * else's): creating them would fail on every pass, so the status says why instead.
   */
  taken?: readonly string[];
  /** The model nodes whose Knative Service or JointInferenceService does not exist, said why. */
  missingModels?: readonly string[];
}

/** The engine's writes, each Service write naming its node. */
type GraphAction = Action<{ node: string }>;

/** How one wanted Service stands after this pass's writes. */
interface ServiceView {
  name: string;
  node: string;
  /** Its name is held by a Service that is not this graph's. */
  taken: boolean;
  readiness: Readiness;
}

const rollingOut: Readiness = {
  status: 'Unknown',
  reason: 'Deploying',
  message: 'latest spec not yet rolled out',
};

const ownedBy = (service: KubeObject, graph: GraphObject) =>
  controlledBy(service, 'mlGraph', graph);

function nodeOf(service: KubeObject): string {
  return service.metadata.labels?.[graphLabels.node] ?? executorNode;
}

/** The write (if any) that makes one stored Service the wanted one, and how it then stands. */
function serviceStep(
  observed: GraphObserved,
  wanted: KubeObject,
): { action?: GraphAction; view: ServiceView } {
  const { name } = wanted.metadata;
  const node = nodeOf(wanted);
  const stored = observed.services.get(name);
  const view = (readiness: Readiness, taken = false) => ({ name, node, taken, readiness });
  const taken =
    stored === undefined ? (observed.taken ?? []).includes(name) : !ownedBy(stored, observed.graph);
  if (taken) return { view: view(serviceReadiness(undefined), true) };
  if (stored === undefined)
    return { action: { kind: 'create', node, object: wanted }, view: view(rollingOut) };
  const drift = workerDrift(stored, wanted);
  if (drift === undefined) return { view: view(serviceReadiness(stored)) };
  return {
    action: { kind: 'update', node, name, patch: drift.patch },
    // Metadata alone keeps Knative's generation: the Service stays as ready as it was.
    view: view(drift.specChanged ? rollingOut : serviceReadiness(stored)),
  };
}

/** The graph's own Services that no node wants any more (a node removed or given a URL). */
function deletions(observed: GraphObserved, wanted: ReadonlySet<string>): GraphAction[] {
  return [...observed.services.values()]
    .filter((s) => !wanted.has(s.metadata.name) && ownedBy(s, observed.graph))
    .map((s) => ({ kind: 'delete', name: s.metadata.name }));
}

function serviceEvent(action: GraphAction, generation: number): GraphAction[] {
  const what = (node: string, name: string) =>
    node === executorNode ? `the executor Service ${name}` : `the Service ${name} of node ${node}`;
  if (action.kind === 'create')
    return [
      event(
        'Normal',
        'ServiceCreated',
        `created ${what(action.node, action.object.metadata.name)}`,
      ),
    ];
  if (action.kind === 'update')
    return [
      event(
        'Normal',
        'ServiceUpdated',
        `updated ${what(action.node, action.name)} to generation ${generation}`,
      ),
    ];
  if (action.kind === 'delete')
    return [
      event(
        'Normal',
        'ServiceDeleted',
        `deleted the Service ${action.name}: no node of the graph runs there now`,
      ),
    ];
  return [];
}

function listed(views: readonly ServiceView[]): string {
  return views.map((v) => v.name).join(', ');
}

/** Ready, from the first thing that holds the graph back. */
function readyCondition(
  desired: GraphDesired,
  views: readonly ServiceView[],
  missingModels: readonly string[] = [],
): ConditionState {
  const ready = (status: ConditionState['status'], reason: string, message: string) =>
    ({ type: 'Ready', status, reason, message }) as const;
  if (!desired.valid) return ready('False', desired.reason, desired.message);
  const taken = views.filter((v) => v.taken);
  if (taken.length > 0) {
    const names = taken.map((v) => `"${v.name}" (${v.node})`).join(', ');
    return ready(
      'False',
      'ServiceTaken',
      `Knative Service ${names} exists and is not this graph's: delete or rename it`,
    );
  }
  // The graph's own Services may be fine: a request would still fail at that node.
  if (missingModels.length > 0) return ready('False', 'ModelNotFound', missingModels.join('; '));
  const failing = views.filter((v) => v.readiness.status === 'False');
  if (failing.length > 0) {
    const detail = failing.map((v) => `${v.name}: ${v.readiness.reason} ${v.readiness.message}`);
    return ready('False', 'ServiceNotReady', detail.map((d) => d.trim()).join('; '));
  }
  const waiting = views.filter((v) => v.readiness.status !== 'True');
  if (waiting.length > 0)
    return ready('Unknown', 'Deploying', `waiting for ${listed(waiting)} to become ready`);
  return ready('True', 'Ready', `${views.length} Service(s) ready: ${listed(views)}`);
}

/** The executor's route, once Knative has given it one. */
function graphUrl(observed: GraphObserved): string | undefined {
  const executor = observed.services.get(observed.graph.metadata.name);
  if (executor === undefined || !ownedBy(executor, observed.graph)) return undefined;
  const url = (executor['status'] as { url?: unknown } | undefined)?.url;
  return typeof url === 'string' ? url : undefined;
}

/** The status write, if any field differs or the heartbeat is due. */
function statusWrite(
  observed: GraphObserved,
  ready: ConditionState,
  now: Date,
  options: DecideOptions,
): GraphAction | undefined {
  const { graph } = observed;
  const previous: MLGraphStatus = graph.status ?? {};
  const conditions = mergeConditions(previous.conditions, [ready], now.toISOString());
  const patch = changedFields(previous, {
    observedGeneration: graph.metadata.generation ?? 0,
    url: graphUrl(observed),
    nodeCount: storedNodeCount(graph),
    conditions,
  });
  return statusAction(graph, patch, now, options);
}

/** The writes that make the stored state match the desired one (see the file comment). */
function reconcileGraph(
  observed: GraphObserved,
  desired: GraphDesired,
  now: Date,
  options: DecideOptions,
): GraphAction[] {
  const steps = desired.valid ? desired.services.map((s) => serviceStep(observed, s)) : [];
  // An invalid graph changes nothing: its Services keep serving the last valid spec.
  const writes = [
    ...steps.flatMap((s) => (s.action === undefined ? [] : [s.action])),
    ...(desired.valid
      ? deletions(observed, new Set(desired.services.map((s) => s.metadata.name)))
      : []),
  ];
  const ready = readyCondition(
    desired,
    steps.map((s) => s.view),
    observed.missingModels,
  );
  const status = statusWrite(observed, ready, now, options);
  const generation = observed.graph.metadata.generation ?? 0;
  return [
    ...(status === undefined ? [] : [status]),
    ...writes,
    ...writes.flatMap((w) => serviceEvent(w, generation)),
    ...transitionEvents(observed.graph.status?.conditions, [ready]),
  ];
}

export { reconcileGraph };
export type { GraphAction, GraphObserved };
