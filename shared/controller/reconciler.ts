/**
 * reconcile-tick's I/O: read what it needs (a tick lists each kind once; an event reads one
 * service), decide with reconcile(), write with applyActions(). A status conflict re-runs the
 * pass for that one service from fresh reads, a few times.
 */
import pMap from 'p-map';
import { UnavailableError } from '../errors/index.js';
import { findObject } from '../k8s/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import type { Logger } from '../telemetry/index.js';
import { jointInferenceServiceSpec } from '../crds/index.js';
import { applyActions } from './apply.js';
import type { ApplyContext } from './apply.js';
import { desiredState } from './desired.js';
import type { WorkerSettings } from './desired.js';
import { reconcile } from './reconcile.js';
import { labels, managerName, roles, workerName } from './types.js';
import type { Role, ServiceObject } from './types.js';

interface ReconcilerOptions {
  kube: Kube;
  settings: WorkerSettings;
  heartbeatMs: number;
  log: Logger;
  now?: () => Date;
  /** Services reconciled at once in a tick. */
  concurrency?: number;
  /** Passes for one service before a conflict is left to the next event or tick. */
  attempts?: number;
}

interface PassReport {
  /** Services looked at. */
  services: number;
  /** API writes made. */
  writes: number;
  /** Status writes that met a concurrent change (each re-run from a fresh read). */
  conflicts: number;
  /** Services whose reconcile failed (logged; the next tick tries again). */
  failed: number;
}

interface Reconciler {
  /** Level-triggered pass over every JointInferenceService (the PingSource tick). */
  tick(): Promise<PassReport>;
  /** One service (an ApiServerSource event); a deleted one is nothing to do. */
  reconcileService(namespace: string, name: string): Promise<PassReport>;
  /** The services of `namespace` that use Model `model` (it was created, changed or deleted). */
  reconcileUsers(namespace: string, model: string): Promise<PassReport>;
}

function byName(items: readonly KubeObject[]): Map<string, KubeObject> {
  return new Map(items.map((item) => [item.metadata.name, item]));
}

function groupByNamespace(items: readonly KubeObject[]): Map<string, Map<string, KubeObject>> {
  const groups = new Map<string, Map<string, KubeObject>>();
  for (const item of items) {
    const ns = item.metadata.namespace ?? '';
    let group = groups.get(ns);
    if (group === undefined) groups.set(ns, (group = new Map<string, KubeObject>()));
    group.set(item.metadata.name, item);
  }
  return groups;
}

/** The worker Services of `service` among `candidates`, by role. */
function workersOf(
  service: ServiceObject,
  candidates: ReadonlyMap<string, KubeObject> | undefined,
): Partial<Record<Role, KubeObject>> {
  const workers: Partial<Record<Role, KubeObject>> = {};
  for (const role of roles) {
    const found = candidates?.get(workerName(service.metadata.name, role));
    if (found !== undefined && found.metadata.labels?.[labels.service] === service.metadata.name)
      workers[role] = found;
  }
  return workers;
}

const empty = new Map<string, KubeObject>();

// Kubernetes label syntax: a selector outside it cannot match any Node (and the API server
// would refuse the query).
const labelName = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/;
const labelKey =
  /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** The Nodes one worker's placement names or selects (none when it is not pinned). */
async function placementCandidates(
  kube: Kube,
  worker: { nodeName?: string | undefined; nodeSelector?: Record<string, string> | undefined },
): Promise<KubeObject[]> {
  if (worker.nodeName !== undefined) {
    const node = await findObject(kube, { kind: 'node', name: worker.nodeName });
    return node === undefined ? [] : [node];
  }
  const selector = Object.entries(worker.nodeSelector ?? {});
  if (selector.length === 0) return [];
  if (!selector.every(([k, v]) => labelKey.test(k) && (v === '' || labelName.test(v)))) return [];
  const labelSelector = selector.map(([k, v]) => `${k}=${v}`).join(',');
  return (await kube.list('node', { labelSelector })).items;
}

/**
 * What one service's desired state reads, and nothing more: its Models by name and the Nodes
 * its workers name or select. An event costs a handful of objects however large the cluster
 * (the tick, which looks at every service, lists each kind once instead).
 */
async function referencedObjects(
  kube: Kube,
  service: ServiceObject,
): Promise<{ models: Map<string, KubeObject>; nodes: Map<string, KubeObject> }> {
  const parsed = jointInferenceServiceSpec.safeParse(service.spec);
  // desiredState names the invalid field; it needs no Model or Node for that.
  if (!parsed.success) return { models: empty, nodes: empty };
  const { edgeWorker, cloudWorker } = parsed.data;
  const namespace = service.metadata.namespace ?? '';
  const modelNames = [...new Set([edgeWorker.model.name, cloudWorker.model.name])];
  const [models, nodes] = await Promise.all([
    Promise.all(modelNames.map((name) => findObject(kube, { kind: 'model', namespace, name }))),
    Promise.all([edgeWorker, cloudWorker].map((worker) => placementCandidates(kube, worker))),
  ]);
  return {
    models: byName(models.filter((m): m is KubeObject => m !== undefined)),
    nodes: byName(nodes.flat()),
  };
}

/** What one pass reads and writes with. */
interface PassDeps {
  kube: Kube;
  settings: WorkerSettings;
  heartbeatMs: number;
  now: () => Date;
  context: ApplyContext;
}

/** A pass, plus what re-running it from fresh reads after a conflict takes. */
interface FreshDeps extends PassDeps {
  log: Logger;
  attempts: number;
}

function emptyReport(services: number): PassReport {
  return { services, writes: 0, conflicts: 0, failed: 0 };
}

/**
 * The workers of `service` the label query missed but a lookup by name finds, and the roles
 * whose name a Service not of this service holds.
 */
async function missingWorkers(
  kube: Kube,
  service: ServiceObject,
  listed: Partial<Record<Role, KubeObject>>,
): Promise<{ workers: Partial<Record<Role, KubeObject>>; taken: Role[] }> {
  let workers = listed;
  const taken: Role[] = [];
  const namespace = service.metadata.namespace ?? '';
  for (const role of roles) {
    if (workers[role] !== undefined) continue;
    const name = workerName(service.metadata.name, role);
    const found = await findObject(kube, { kind: 'knativeService', namespace, name });
    if (found === undefined) continue;
    // Labelled for this service, it appeared after the list was taken: it is the worker.
    if (found.metadata.labels?.[labels.service] === service.metadata.name) {
      workers = { ...workers, [role]: found };
    } else taken.push(role);
  }
  return { workers, taken };
}

async function pass(
  deps: PassDeps,
  service: ServiceObject,
  listed: Partial<Record<Role, KubeObject>>,
  models: ReadonlyMap<string, KubeObject>,
  nodes: ReadonlyMap<string, KubeObject>,
) {
  const { kube, now } = deps;
  const desired = desiredState(service, models, nodes, deps.settings);
  // A worker missing from the label query may have a name someone else's Knative Service
  // holds. Looked up by name, only while missing, so the status can say so instead of a
  // create failing with 409 on every pass.
  const { workers, taken } = desired.valid
    ? await missingWorkers(kube, service, listed)
    : { workers: listed, taken: [] };
  const actions = reconcile({ service, workers, taken }, desired, now(), {
    heartbeatMs: deps.heartbeatMs,
  });
  return applyActions(kube, service, actions, deps.context);
}

/** Passes over one service from fresh reads until one meets no conflict (or attempts run out). */
async function fresh(
  deps: FreshDeps,
  namespace: string,
  name: string,
  report: PassReport,
): Promise<void> {
  const { kube, attempts } = deps;
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    const [service, workers] = await Promise.all([
      findObject(kube, { kind: 'jointInferenceService', namespace, name }) as Promise<
        ServiceObject | undefined
      >,
      kube.list('knativeService', { namespace, labelSelector: `${labels.service}=${name}` }),
    ]);
    if (service === undefined) return;
    const { models, nodes } = await referencedObjects(kube, service);
    const result = await pass(
      deps,
      service,
      workersOf(service, byName(workers.items)),
      models,
      nodes,
    );
    report.writes += result.writes;
    if (!result.conflict) return;
    report.conflicts += 1;
  }
  deps.log.warn({ namespace, name, attempts }, 'status kept conflicting; left to the next tick');
}

function usesModel(service: KubeObject, model: string): boolean {
  const spec = service['spec'] as
    Partial<Record<'edgeWorker' | 'cloudWorker', { model?: { name?: unknown } }>> | undefined;
  return spec?.edgeWorker?.model?.name === model || spec?.cloudWorker?.model?.name === model;
}

async function reconcileUsers(
  deps: FreshDeps,
  namespace: string,
  model: string,
): Promise<PassReport> {
  const report = emptyReport(0);
  const { items } = await deps.kube.list('jointInferenceService', { namespace });
  const users = items.filter((item) => usesModel(item, model));
  report.services = users.length;
  for (const user of users) await fresh(deps, namespace, user.metadata.name, report);
  return report;
}

async function tick(deps: FreshDeps, concurrency: number): Promise<PassReport> {
  const { kube, log } = deps;
  const [services, workers, models, nodes] = await Promise.all([
    kube.list('jointInferenceService'),
    kube.list('knativeService', { labelSelector: `${labels.managedBy}=${managerName}` }),
    kube.list('model'),
    kube.list('node'),
  ]);
  const workersByNs = groupByNamespace(workers.items);
  const modelsByNs = groupByNamespace(models.items);
  const nodeMap = byName(nodes.items);
  const report = emptyReport(services.items.length);
  let unavailable: UnavailableError | undefined;
  await pMap(
    services.items as ServiceObject[],
    async (service) => {
      const ns = service.metadata.namespace ?? '';
      try {
        const result = await pass(
          deps,
          service,
          workersOf(service, workersByNs.get(ns)),
          modelsByNs.get(ns) ?? empty,
          nodeMap,
        );
        report.writes += result.writes;
        if (result.conflict) {
          report.conflicts += 1;
          await fresh(deps, ns, service.metadata.name, report);
        }
      } catch (err) {
        report.failed += 1;
        if (err instanceof UnavailableError) unavailable ??= err;
        log.error(
          { err, namespace: ns, name: service.metadata.name },
          'reconcile failed; the next tick tries again',
        );
      }
    },
    { concurrency },
  );
  // The tick is redelivered (and every service looked at again) when the API server failed.
  if (unavailable !== undefined) throw unavailable;
  return report;
}

function createReconciler(options: ReconcilerOptions): Reconciler {
  const { kube, log } = options;
  const now = options.now ?? (() => new Date());
  const deps: FreshDeps = {
    kube,
    settings: options.settings,
    heartbeatMs: options.heartbeatMs,
    now,
    context: { log, now, component: 'reconcile-tick' },
    log,
    attempts: options.attempts ?? 3,
  };
  return {
    async reconcileService(namespace, name) {
      const report = emptyReport(1);
      await fresh(deps, namespace, name, report);
      return report;
    },
    reconcileUsers: (namespace, model) => reconcileUsers(deps, namespace, model),
    tick: () => tick(deps, options.concurrency ?? 16),
  };
}

export { createReconciler };
export type { Reconciler, ReconcilerOptions, PassReport };
