/**
 * The MLGraph resource: a graph of model, router, join, transform and outlier nodes that one
 * predict request walks (seed 003). The schema is the CRD's (one object per node, no unions: a
 * structural schema cannot express them); `graphProblems` is what the schema cannot say — names
 * resolve, no cycle, one way in to every node but a join, a depth limit — each problem naming
 * its node, so an invalid graph gets a condition rather than a crash.
 */
import { z } from 'zod';
import { childName, strategy, unknownChildren } from './route-strategy.js';

/** Node names become Knative Service names `<graph>-<node>`: both stay short. */
const nodeName = childName.max(30);
const httpUrl = z
  .string()
  .max(2048)
  .regex(/^https?:\/\/[^\s/?#]+[^\s]*$/, 'must be an http(s):// URL');
const oipName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/, 'must be 1-128 of [A-Za-z0-9_.-]');

const graphNodeKinds = ['model', 'router', 'join', 'transform', 'outlier'] as const;
const dependencies = ['Hard', 'Soft'] as const;
const joinTypes = ['inner', 'any', 'outer'] as const;
/** Deepest path (in edges) from the root a graph may have. */
const maxGraphDepth = 16;
const maxGraphNodes = 32;

/** A duration in milliseconds, up to ten minutes. */
const milliseconds = z.number().int().min(1).max(600_000);

const graphEdge = z.object({
  node: nodeName.describe('A node of this graph.'),
  timeoutMs: milliseconds
    .optional()
    .describe("Deadline of each call to that node, within the request's remaining budget."),
  retries: z
    .number()
    .int()
    .min(0)
    .max(5)
    .optional()
    .describe('Retries after a retryable failure (no answer, 502, 503, 504); default 0.'),
  dependency: z
    .enum(dependencies)
    .optional()
    .describe(
      "Hard (default): the graph fails with that step's status. Soft: the step is skipped and the answer says so.",
    ),
});

/**
 * What choosing one child costs a router that learns, in the reward's units (a right answer is
 * 1): a fixed cost per request routed to it, plus its measured latency times a weight.
 * "Accuracy minus lambda times offload" is `{cloud: {perRequest: lambda}}`.
 */
const armCost = z.object({
  perRequest: z
    .number()
    .min(0)
    .max(1000)
    .optional()
    .describe('Charged for every request routed to this child.'),
  perLatencySecond: z
    .number()
    .min(0)
    .max(1_000_000)
    .optional()
    .describe("Times the child's measured call latency in seconds (measured by the executor)."),
});

/** A router's strategy as the CRD stores it; checked against the router's own schema. */
const routeStrategySpec = z
  .object({
    kind: z.enum(['static', 'weighted', 'condition', 'epsilon-greedy', 'thompson', 'ucb1']),
    children: z.array(nodeName).optional().describe('static: a fixed subset of the children.'),
    weights: z.record(z.string(), z.number()).optional().describe('weighted: child -> weight.'),
    epsilon: z.number().min(0).max(1).optional().describe('epsilon-greedy: exploration rate.'),
    rules: z
      .array(
        z.object({
          when: z.object({
            path: z.string(),
            op: z.enum(['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'exists']),
            value: z.unknown().optional().meta({ 'x-kubernetes-preserve-unknown-fields': true }),
          }),
          route: z.array(nodeName),
        }),
      )
      .optional()
      .describe('condition: the first rule that holds on the request body decides.'),
    otherwise: z.array(nodeName).optional().describe('condition: the route when no rule holds.'),
  })
  .describe('How the router picks among its children (docs/mlgraph.md).');

const graphNode = z.object({
  name: nodeName,
  kind: z.enum(graphNodeKinds).describe('model, router, join, transform or outlier.'),
  model: z
    .object({
      url: httpUrl.optional().describe('An OIP v2 server outside the cluster or namespace.'),
      service: nodeName.optional().describe('A Knative Service in this namespace.'),
      jointInferenceService: nodeName
        .optional()
        .describe('A JointInferenceService in this namespace (its edge worker answers).'),
      name: oipName.describe('The model name on that server.'),
      version: oipName.optional(),
    })
    .optional()
    .describe(
      'kind model: where the OIP v2 endpoint is (exactly one of url, service, jointInferenceService).',
    ),
  router: z
    .object({
      strategy: routeStrategySpec.optional(),
      costs: z
        .record(nodeName, armCost)
        .optional()
        .describe(
          'What routing to each child costs a learning router, in the reward\'s units: it maximises reward minus cost (docs/mlgraph.md, "Arms that cost").',
        ),
      url: httpUrl
        .optional()
        .describe('Your own router (the route contract) instead of a deployed one.'),
    })
    .optional(),
  join: z
    .object({
      type: z
        .enum(joinTypes)
        .optional()
        .describe(
          'inner (default): every route taken; any: the first input; outer: what arrives within windowMs, marked partial.',
        ),
      windowMs: milliseconds.optional().describe('outer: the window.'),
      url: httpUrl
        .optional()
        .describe('Your own joiner (the join contract) instead of a deployed one.'),
    })
    .optional(),
  transform: z.object({ url: httpUrl }).optional().describe('kind transform: POST body -> body.'),
  outlier: z
    .object({
      url: httpUrl
        .optional()
        .describe('Your own scorer: POST the request, answer {"score": n, "outlier": bool}.'),
      reference: z
        .string()
        .regex(/^(file|https?):\/\/\S+$/, 'must be a file://, http:// or https:// URL')
        .optional()
        .describe(
          'Or the built-in detector: a drift reference (as npm run models writes beside each model, models/*.drift.json).',
        ),
      threshold: z
        .number()
        .min(0)
        .optional()
        .describe("Score above which the input is an outlier; default the reference's p99."),
    })
    .optional()
    .describe('kind outlier: scores the request and passes it on unchanged, the score with it.'),
  data: z
    .enum(['parent', 'request'])
    .optional()
    .describe("What the node receives: its parent's answer (default) or the graph's request."),
  children: z.array(graphEdge).max(16).optional(),
});

const mlGraphSpec = z.object({
  root: nodeName.describe('The node a request enters by.'),
  nodes: z.array(graphNode).min(1).max(maxGraphNodes),
  timeoutMs: milliseconds
    .optional()
    .describe('Budget of one request through the whole graph; default 30000.'),
});

const mlGraphStatus = z.object({
  conditions: z
    .array(
      z.object({
        type: z.string().min(1),
        status: z.enum(['True', 'False', 'Unknown']),
        reason: z.string().optional(),
        message: z.string().optional(),
        lastTransitionTime: z.string().optional(),
      }),
    )
    .optional(),
  observedGeneration: z.number().int().min(0).optional(),
  url: z.string().optional().describe("The graph's predict URL (its executor)."),
  nodeCount: z.number().int().min(0).optional(),
  lastReconcileTime: z.string().optional(),
});

type MLGraphSpec = z.output<typeof mlGraphSpec>;
type GraphNode = MLGraphSpec['nodes'][number];

/** One thing wrong with a graph, naming the node it is about. */
interface GraphProblem {
  node: string;
  message: string;
}

/** Parents of each node, in declaration order. */
function parentsOf(spec: MLGraphSpec): Map<string, string[]> {
  const parents = new Map<string, string[]>(spec.nodes.map((n) => [n.name, []]));
  for (const node of spec.nodes) {
    for (const edge of node.children ?? []) parents.get(edge.node)?.push(node.name);
  }
  return parents;
}

function routerProblems(node: GraphNode, children: readonly string[]): string[] {
  const problems = children.length === 0 ? ['a router needs children'] : [];
  const parsed = strategy.safeParse(node.router?.strategy ?? { kind: 'static' });
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join('.') || 'kind'}: ${i.message}`);
    return [...problems, `router.strategy: ${detail.join('; ')}`];
  }
  const unknown = unknownChildren(parsed.data, children);
  if (unknown.length > 0) problems.push(`router.strategy names ${unknown.join(', ')}, not a child`);
  const costed = Object.keys(node.router?.costs ?? {}).filter((c) => !children.includes(c));
  if (costed.length > 0) problems.push(`router.costs names ${costed.join(', ')}, not a child`);
  if (node.router?.costs !== undefined && node.router.url !== undefined)
    problems.push(
      'router.costs is for a deployed router: a router of your own (url) keeps its own',
    );
  return problems;
}

/** What each kind needs of its own settings. */
const kindChecks: Record<GraphNode['kind'], (node: GraphNode, children: string[]) => string[]> = {
  model: (node) =>
    [node.model?.url, node.model?.service, node.model?.jointInferenceService].filter(
      (w) => w !== undefined,
    ).length === 1
      ? []
      : ['a model node needs model with exactly one of url, service, jointInferenceService'],
  router: routerProblems,
  transform: (node) =>
    node.transform === undefined ? ['a transform node needs transform.url'] : [],
  join: (node) =>
    node.join?.type === 'outer' && node.join.windowMs === undefined
      ? ['an outer join needs join.windowMs']
      : [],
  outlier: (node) =>
    (node.outlier?.url === undefined) === (node.outlier?.reference === undefined)
      ? ['an outlier node needs outlier with exactly one of url, reference']
      : [],
};

function kindProblems(node: GraphNode): string[] {
  const problems = kindChecks[node.kind](
    node,
    (node.children ?? []).map((c) => c.node),
  );
  for (const field of graphNodeKinds) {
    if (field !== node.kind && node[field] !== undefined)
      problems.push(`${field} is set on a ${node.kind} node`);
  }
  return problems;
}

/** Longest path (in edges) from the root, or undefined when a cycle is reachable. */
function depthFromRoot(
  spec: MLGraphSpec,
  byName: Map<string, GraphNode>,
): Map<string, number> | undefined {
  const depth = new Map<string, number>();
  const state = new Map<string, 'open' | 'done'>();
  let cyclic = false;
  // Depth-first, longest path to each node through a topological order.
  const order: string[] = [];
  const visit = (name: string): void => {
    if (state.get(name) === 'done' || cyclic) return;
    if (state.get(name) === 'open') {
      cyclic = true;
      return;
    }
    state.set(name, 'open');
    for (const edge of byName.get(name)?.children ?? [])
      if (byName.has(edge.node)) visit(edge.node);
    state.set(name, 'done');
    order.push(name);
  };
  visit(spec.root);
  if (cyclic) return undefined;
  depth.set(spec.root, 0);
  for (const name of order.reverse()) {
    const at = depth.get(name) ?? 0;
    for (const edge of byName.get(name)?.children ?? [])
      depth.set(edge.node, Math.max(depth.get(edge.node) ?? 0, at + 1));
  }
  return depth;
}

/** Names: each declared once, the root and every child a node. */
function nameProblems(spec: MLGraphSpec, byName: ReadonlyMap<string, GraphNode>): GraphProblem[] {
  const problems: GraphProblem[] = [];
  const declared = new Set<string>();
  for (const node of spec.nodes) {
    if (declared.has(node.name)) problems.push({ node: node.name, message: 'declared twice' });
    declared.add(node.name);
  }
  if (!byName.has(spec.root)) problems.push({ node: spec.root, message: 'the root is not a node' });
  for (const node of spec.nodes) {
    const seen = new Set<string>();
    for (const edge of node.children ?? []) {
      if (!byName.has(edge.node))
        problems.push({ node: node.name, message: `child ${edge.node} is not a node` });
      if (seen.has(edge.node))
        problems.push({ node: node.name, message: `child ${edge.node} is named twice` });
      seen.add(edge.node);
    }
  }
  return problems;
}

/** One way in to every node but a join; none to the root. */
function parentProblems(spec: MLGraphSpec, byName: ReadonlyMap<string, GraphNode>): GraphProblem[] {
  const problems: GraphProblem[] = [];
  for (const [name, from] of parentsOf(spec)) {
    if (name === spec.root && from.length > 0)
      problems.push({ node: name, message: `the root has parents (${from.join(', ')})` });
    if (byName.get(name)?.kind !== 'join' && from.length > 1)
      problems.push({
        node: name,
        message: `has ${from.length} parents (${from.join(', ')}): only a join may`,
      });
  }
  return problems;
}

/** Everything wrong with a graph the schema cannot see; empty when it can run. */
function graphProblems(spec: MLGraphSpec): GraphProblem[] {
  const byName = new Map(spec.nodes.map((n) => [n.name, n]));
  const problems = [
    ...nameProblems(spec, byName),
    ...spec.nodes.flatMap((node) =>
      kindProblems(node).map((message) => ({ node: node.name, message })),
    ),
    ...parentProblems(spec, byName),
  ];
  if (problems.length > 0) return problems;
  const depth = depthFromRoot(spec, byName);
  if (depth === undefined) return [{ node: spec.root, message: 'the graph has a cycle' }];
  return spec.nodes.flatMap((node): GraphProblem[] => {
    const d = depth.get(node.name);
    if (d === undefined) return [{ node: node.name, message: 'not reachable from the root' }];
    if (d > maxGraphDepth)
      return [{ node: node.name, message: `at depth ${d}, deeper than ${maxGraphDepth}` }];
    return [];
  });
}

export { mlGraphSpec, mlGraphStatus, graphProblems, joinTypes, armCost };
export type { MLGraphSpec, GraphNode };
