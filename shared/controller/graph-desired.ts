/**
 * What an MLGraph asks for: its executor Knative Service (named as the graph: the graph's public
 * entry, running the plan) and a Service for each router node that does not bring its own URL
 * (the executor runs the router itself; its Service shows `/arms` and takes rewards). A join
 * without a URL runs in the executor and needs no Service. Pure, as desired.ts is: the same
 * graph gives the same objects, so comparing them with what is stored tells whether anything
 * must be written.
 */
import type { z } from 'zod';
import { graphProblems, mlGraphSpec } from '../crds/index.js';
import type { GraphNode, MLGraphSpec, mlGraphStatus } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';
// MLGRAPH_GRAPH is a contract with the executor, which parses it with this same schema.
import { graphPlan } from '../messages/graph-plan.js';
import { dns1035Label } from './desired.js';
import { knativeService } from './knative-service.js';
import type { WorkerSettings } from './knative-service.js';
import { workerName } from './types.js';

type MLGraphStatus = z.output<typeof mlGraphStatus>;
type PlanInput = z.input<typeof graphPlan>;
type PlanNodeInput = PlanInput['nodes'][number];
type RouterStrategy = NonNullable<PlanNodeInput['router']>['strategy'];

/** An MLGraph as stored; `spec` is parsed before use. */
interface GraphObject extends KubeObject {
  spec?: unknown;
  status?: MLGraphStatus;
}

/** Labels on every Service of a graph, so one list call per tick finds them all. */
const graphLabels = Object.freeze({
  graph: 'edgeai.io/mlgraph',
  node: 'edgeai.io/mlgraph-node',
});
/** The `edgeai.io/mlgraph-node` value of the executor (the graph's own Service). */
const executorNode = 'executor';
/** Knative names a revision `<service>-00001`, and that must stay a 63-character DNS label. */
const maxGraphServiceName = 63 - '-00001'.length;
const defaultTimeoutMs = 30_000;

type GraphDesired =
  | { valid: false; reason: 'InvalidGraph'; message: string }
  | { valid: true; spec: MLGraphSpec; services: KubeObject[] };

function nodeServiceName(graph: string, node: string): string {
  return `${graph}-${node}`;
}

/**
 * A deployed node's name in Redis (MLGRAPH_NODE): namespaced, so graphs of two namespaces
 * sharing a Redis keep apart. The executor runs a built-in router under the same name.
 */
function nodeKeyOf(graph: string, node: string, namespace: string): string {
  return `${namespace}.${nodeServiceName(graph, node)}`;
}

function clusterUrl(service: string, namespace: string): string {
  return `http://${service}.${namespace}.svc.cluster.local`;
}

/**
 * Router nodes without a URL of their own have a Service of the graph (the executor runs them,
 * on the state that Service shows). A join without one is the executor's alone: no Service.
 */
function isDeployed(node: GraphNode): boolean {
  return node.kind === 'router' && node.router?.url === undefined;
}

function modelUrl(model: GraphNode['model'], namespace: string): string | undefined {
  if (model?.url !== undefined) return model.url;
  if (model?.service !== undefined) return clusterUrl(model.service, namespace);
  // A JointInferenceService answers through its edge worker (which offloads to its cloud).
  if (model?.jointInferenceService !== undefined)
    return clusterUrl(workerName(model.jointInferenceService, 'edge'), namespace);
  return undefined;
}

/**
 * Where the executor calls a node. A built-in router, join or outlier node has none: the
 * executor runs it (no hop); a built-in router on the state its Service shares.
 */
function nodeUrl(node: GraphNode, namespace: string): string | undefined {
  if (isDeployed(node)) return undefined;
  if (node.kind === 'model') return modelUrl(node.model, namespace);
  const own = {
    router: node.router?.url,
    join: node.join?.url,
    transform: node.transform?.url,
    outlier: node.outlier?.url,
  };
  return own[node.kind];
}

/** A built-in router as the executor runs it, on the state its Service shares. */
function plannedRouter(node: GraphNode, graph: string, namespace: string) {
  const costs = node.router?.costs;
  return {
    node: nodeKeyOf(graph, node.name, namespace),
    // The CRD's flat form of the strategy; graphProblems checked it against the router's own
    // schema, and the plan is parsed with it below.
    strategy: (node.router?.strategy ?? { kind: 'static' }) as RouterStrategy,
    // What each child costs its bandit: the executor runs the router, so both kinds.
    ...(costs === undefined ? {} : { costs }),
  };
}

function planNode(node: GraphNode, graph: string, namespace: string): PlanNodeInput {
  const { model, join, outlier } = node;
  const builtinRouter = node.kind === 'router' && isDeployed(node);
  return {
    name: node.name,
    kind: node.kind,
    url: nodeUrl(node, namespace),
    ...(builtinRouter ? { router: plannedRouter(node, graph, namespace) } : {}),
    ...(node.kind === 'model' && model !== undefined
      ? { model: { name: model.name, version: model.version } }
      : {}),
    ...(node.kind === 'join'
      ? { join: { type: join?.type ?? 'inner', windowMs: join?.windowMs } }
      : {}),
    ...(node.kind === 'outlier' && outlier !== undefined
      ? { outlier: { threshold: outlier.threshold, reference: outlier.reference } }
      : {}),
    data: node.data ?? 'parent',
    children: (node.children ?? []).map((edge) => ({
      node: edge.node,
      timeoutMs: edge.timeoutMs,
      retries: edge.retries ?? 0,
      dependency: edge.dependency ?? 'Hard',
    })),
  };
}

/** The executor's configuration: every node resolved to its URL, defaults filled in. */
function graphPlanOf(graph: GraphObject, spec: MLGraphSpec): PlanInput {
  const { name, namespace = '' } = graph.metadata;
  return {
    graph: `${namespace}/${name}`,
    root: spec.root,
    timeoutMs: spec.timeoutMs ?? defaultTimeoutMs,
    nodes: spec.nodes.map((node) => planNode(node, name, namespace)),
  };
}

/** One Service of the graph; `node` is the executor's or a node's name. */
function graphService(
  graph: GraphObject,
  node: string,
  env: Record<string, string | number>,
  settings: WorkerSettings,
): KubeObject {
  const executor = node === executorNode;
  return knativeService({
    kind: 'mlGraph',
    owner: graph,
    name: executor ? graph.metadata.name : nodeServiceName(graph.metadata.name, node),
    labels: { [graphLabels.graph]: graph.metadata.name, [graphLabels.node]: node },
    // The executor is the graph's entry; the nodes are reached only by it, inside the cluster.
    clusterLocal: !executor,
    env: Object.entries(env).map(([k, v]) => ({ name: k, value: String(v) })),
    settings,
  });
}

/** A built-in router's own Service: its `/arms`, on the state the executor routes on. */
function routerEnv(node: GraphNode, key: string): Record<string, string | number> {
  return {
    FUNCTION_TARGET: 'router',
    MLGRAPH_NODE: key,
    MLGRAPH_CHILDREN: (node.children ?? []).map((c) => c.node).join(','),
    MLGRAPH_ROUTE: JSON.stringify(node.router?.strategy ?? { kind: 'static' }),
    ...perRequestCosts(node),
  };
}

/**
 * The fixed costs, for the router Service's `/arms` (the executor routes; the Service shows the
 * arms): a router on its own measures no latency, so it takes `perRequest` only.
 */
function perRequestCosts(node: GraphNode): Record<string, string> {
  const costs = Object.entries(node.router?.costs ?? {}).flatMap(([child, cost]) =>
    cost.perRequest === undefined ? [] : [[child, { perRequest: cost.perRequest }] as const],
  );
  return costs.length === 0 ? {} : { MLGRAPH_ARM_COSTS: JSON.stringify(Object.fromEntries(costs)) };
}

type Issue = { path: readonly PropertyKey[]; message: string };

/** A schema issue, naming the node when it is inside one. */
function issueText(issue: Issue, raw: unknown): string {
  const [first, index, ...rest] = issue.path;
  const nodes = (raw as { nodes?: unknown } | null | undefined)?.nodes;
  const at = Array.isArray(nodes) && typeof index === 'number' ? (nodes[index] as unknown) : null;
  const name = (at as { name?: unknown } | null)?.name;
  if (first === 'nodes' && typeof name === 'string' && name !== '') {
    const field = rest.map(String).join('.');
    return `node ${name}: ${field === '' ? '' : `${field}: `}${issue.message}`;
  }
  return `spec.${issue.path.map(String).join('.')}: ${issue.message}`;
}

/** The Service names Knative could not take, each naming its node. */
function nameProblems(graph: string, spec: MLGraphSpec): string[] {
  const problems: string[] = [];
  if (graph.length > maxGraphServiceName || !dns1035Label.test(graph)) {
    problems.push(
      `metadata.name: "${graph}" names the executor Service: at most ${maxGraphServiceName} characters, starting with a lowercase letter, of lowercase letters, digits and '-'`,
    );
  }
  for (const node of spec.nodes.filter(isDeployed)) {
    const service = nodeServiceName(graph, node.name);
    if (service.length > maxGraphServiceName)
      problems.push(
        `node ${node.name}: its Service name "${service}" is longer than ${maxGraphServiceName} characters: shorten the node's or the graph's name`,
      );
  }
  return problems;
}

/** The spec, or every reason it cannot be deployed. */
function checkedSpec(graph: GraphObject): { spec: MLGraphSpec } | { problems: string[] } {
  const parsed = mlGraphSpec.safeParse(graph.spec);
  if (!parsed.success)
    return { problems: parsed.error.issues.map((issue) => issueText(issue, graph.spec)) };
  const problems = [
    ...graphProblems(parsed.data).map((p) => `node ${p.node}: ${p.message}`),
    ...nameProblems(graph.metadata.name, parsed.data),
  ];
  return problems.length > 0 ? { problems } : { spec: parsed.data };
}

/** The Services of `graph`, or why it cannot be deployed (every problem, each naming its node). */
function desiredGraph(graph: GraphObject, settings: WorkerSettings): GraphDesired {
  const checked = checkedSpec(graph);
  if ('problems' in checked)
    return { valid: false, reason: 'InvalidGraph', message: checked.problems.join('; ') };
  const { spec } = checked;
  // The executor refuses a plan its schema rejects: better said here than in a crash loop.
  const plan = graphPlan.safeParse(graphPlanOf(graph, spec));
  if (!plan.success) {
    const message = plan.error.issues.map((i) => i.message).join('; ');
    return { valid: false, reason: 'InvalidGraph', message };
  }
  const executor = graphService(
    graph,
    executorNode,
    { FUNCTION_TARGET: 'router', MLGRAPH_GRAPH: JSON.stringify(plan.data) },
    settings,
  );
  const nodes = spec.nodes
    .filter(isDeployed)
    .map((node) =>
      graphService(
        graph,
        node.name,
        routerEnv(node, nodeKeyOf(graph.metadata.name, node.name, graph.metadata.namespace ?? '')),
        settings,
      ),
    );
  return { valid: true, spec, services: [executor, ...nodes] };
}

/** spec.nodes.length as stored, valid or not. */
function storedNodeCount(graph: GraphObject): number {
  const nodes = (graph.spec as { nodes?: unknown } | null | undefined)?.nodes;
  return Array.isArray(nodes) ? nodes.length : 0;
}

export { desiredGraph, graphLabels, executorNode, storedNodeCount };
export type { GraphDesired, GraphObject, MLGraphStatus };
