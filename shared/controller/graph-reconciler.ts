/**
 * The MLGraph controller's I/O, beside reconciler.ts's for JointInferenceServices: read (a tick
 * lists the graphs and their Services once; an event reads one graph), decide with
 * reconcileGraph(), write with applyActions(). A status conflict re-runs the pass for that one
 * graph from fresh reads, a few times.
 */
import pMap from 'p-map';
import { UnavailableError } from '../errors/index.js';
import { findObject } from '../k8s/index.js';
import type { Kube, KubeObject } from '../k8s/index.js';
import { applyActions } from './apply.js';
import type { ApplyContext, ApplyResult } from './apply.js';
import { desiredGraph, graphLabels } from './graph-desired.js';
import type { GraphDesired, GraphObject } from './graph-desired.js';
import { ownedBy, reconcileGraph } from './graph-reconcile.js';
import type { PassReport, ReconcilerOptions } from './reconciler.js';

interface GraphReconciler {
  /** Level-triggered pass over every MLGraph (the PingSource tick); `services` counts graphs. */
  tick(): Promise<PassReport>;
  /** One graph (an ApiServerSource event); a deleted one is nothing to do. */
  reconcileGraph(namespace: string, name: string): Promise<PassReport>;
}

const byName = (items: readonly KubeObject[]) =>
  new Map(items.map((item) => [item.metadata.name, item]));

/** The Services of each graph, by `<namespace>/<graph>` and then by name. */
function servicesByGraph(items: readonly KubeObject[]): Map<string, Map<string, KubeObject>> {
  const groups = new Map<string, Map<string, KubeObject>>();
  for (const item of items) {
    const key = `${item.metadata.namespace ?? ''}/${item.metadata.labels?.[graphLabels.graph] ?? ''}`;
    let group = groups.get(key);
    if (group === undefined) groups.set(key, (group = new Map<string, KubeObject>()));
    group.set(item.metadata.name, item);
  }
  return groups;
}

/**
 * Wanted Services the label query did not return: looked up by name, only while missing. One
 * of this graph's that appeared after the list was taken joins `services`; any other holder of
 * the name is reported, rather than a create failing with 409 on every pass.
 */
async function lookUpMissing(
  kube: Kube,
  graph: GraphObject,
  desired: GraphDesired,
  services: Map<string, KubeObject>,
): Promise<string[]> {
  const taken: string[] = [];
  const namespace = graph.metadata.namespace ?? '';
  for (const wanted of desired.valid ? desired.services : []) {
    const name = wanted.metadata.name;
    if (services.has(name)) continue;
    const found = await findObject(kube, { kind: 'knativeService', namespace, name });
    if (found === undefined) continue;
    if (ownedBy(found, graph)) services.set(name, found);
    else taken.push(name);
  }
  return taken;
}

/**
 * The model nodes whose Knative Service or JointInferenceService is not in the graph's
 * namespace (a model given by URL is not looked at): each said as its node. One get per named
 * model per pass, while the graph is valid.
 */
async function missingModels(kube: Kube, graph: GraphObject, desired: GraphDesired) {
  const namespace = graph.metadata.namespace ?? '';
  const missing: string[] = [];
  for (const node of desired.valid ? desired.spec.nodes : []) {
    const { service, jointInferenceService } = node.model ?? {};
    const name = service ?? jointInferenceService;
    if (node.kind !== 'model' || name === undefined) continue;
    const kind = service !== undefined ? 'knativeService' : 'jointInferenceService';
    if ((await findObject(kube, { kind, namespace, name })) !== undefined) continue;
    const what = service !== undefined ? 'Knative Service' : 'JointInferenceService';
    missing.push(`node ${node.name}: ${what} ${namespace}/${name} not found`);
  }
  return missing;
}

/** One pass over every graph, `concurrency` at a time; a failing graph is logged and counted. */
async function tickGraphs(
  options: ReconcilerOptions,
  tickOne: (
    graph: GraphObject,
    services: ReadonlyMap<string, KubeObject>,
    report: PassReport,
  ) => Promise<void>,
): Promise<PassReport> {
  const { kube, log } = options;
  const [graphs, services] = await Promise.all([
    kube.list('mlGraph'),
    // Existence selector: every Service of every graph, in one call.
    kube.list('knativeService', { labelSelector: graphLabels.graph }),
  ]);
  const grouped = servicesByGraph(services.items);
  const report: PassReport = { services: graphs.items.length, writes: 0, conflicts: 0, failed: 0 };
  let unavailable: UnavailableError | undefined;
  await pMap(
    graphs.items as GraphObject[],
    async (graph) => {
      const { namespace = '', name } = graph.metadata;
      try {
        await tickOne(graph, grouped.get(`${namespace}/${name}`) ?? new Map(), report);
      } catch (err) {
        report.failed += 1;
        if (err instanceof UnavailableError) unavailable ??= err;
        log.error({ err, namespace, name }, 'graph reconcile failed; the next tick tries again');
      }
    },
    { concurrency: options.concurrency ?? 16 },
  );
  // The tick is redelivered (and every graph looked at again) when the API server failed.
  if (unavailable !== undefined) throw unavailable;
  return report;
}

function createGraphReconciler(options: ReconcilerOptions): GraphReconciler {
  const { kube, log } = options;
  const now = options.now ?? (() => new Date());
  const attempts = options.attempts ?? 3;
  const context: ApplyContext = { log, now, component: 'reconcile-tick', owner: 'mlGraph' };

  async function pass(
    graph: GraphObject,
    found: ReadonlyMap<string, KubeObject>,
  ): Promise<ApplyResult> {
    const desired = desiredGraph(graph, options.settings);
    const services = new Map(found);
    const [taken, models] = await Promise.all([
      lookUpMissing(kube, graph, desired, services),
      missingModels(kube, graph, desired),
    ]);
    const observed = { graph, services, taken, missingModels: models };
    const actions = reconcileGraph(observed, desired, now(), {
      heartbeatMs: options.heartbeatMs,
    });
    return applyActions(kube, graph, actions, context);
  }

  async function fresh(namespace: string, name: string, report: PassReport): Promise<void> {
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      const [graph, services] = await Promise.all([
        findObject(kube, { kind: 'mlGraph', namespace, name }) as Promise<GraphObject | undefined>,
        kube.list('knativeService', { namespace, labelSelector: `${graphLabels.graph}=${name}` }),
      ]);
      if (graph === undefined) return;
      const result = await pass(graph, byName(services.items));
      report.writes += result.writes;
      if (!result.conflict) return;
      report.conflicts += 1;
    }
    log.warn({ namespace, name, attempts }, 'graph status kept conflicting; left to the next tick');
  }

  async function tickOne(
    graph: GraphObject,
    services: ReadonlyMap<string, KubeObject>,
    report: PassReport,
  ): Promise<void> {
    const ns = graph.metadata.namespace ?? '';
    const result = await pass(graph, services);
    report.writes += result.writes;
    if (result.conflict) {
      report.conflicts += 1;
      await fresh(ns, graph.metadata.name, report);
    }
  }

  return {
    async reconcileGraph(namespace, name) {
      const report: PassReport = { services: 1, writes: 0, conflicts: 0, failed: 0 };
      await fresh(namespace, name, report);
      return report;
    },

    tick: () => tickGraphs(options, tickOne),
  };
}

export { createGraphReconciler };
export type { GraphReconciler };
