/**
 * An MLGraph as its executor runs it (MLGRAPH_GRAPH, JSON): the controller resolves every node
 * to the URL it answers at and fills in the defaults; the executor (the router function in
 * graph mode) checks it with this same schema at start-up. The graph was validated by the
 * controller (`graphProblems`); the executor checks again, since a hand-written plan is allowed.
 */
import { z } from 'zod';
import { graphProblems, joinTypes, mlGraphSpec } from '../crds/mlgraph.js';
import { nodeKey, strategy } from '../crds/route-strategy.js';
import { armCosts } from './mlgraph.js';
import type { MLGraphSpec } from '../crds/mlgraph.js';

const plannedEdge = z
  .object({
    node: z.string(),
    timeoutMs: z.number().int().min(1).optional(),
    retries: z.number().int().min(0).max(5).default(0),
    dependency: z.enum(['Hard', 'Soft']).default('Hard'),
  })
  .strict();

const plannedNode = z
  .object({
    name: z.string(),
    kind: z.enum(['model', 'router', 'join', 'transform', 'outlier']),
    /**
     * Where the node answers: a model's OIP server (its base URL), a router's or joiner's
     * service, a transform or outlier endpoint. A built-in router, join or outlier node has
     * none: the executor runs it.
     */
    url: z.url({ protocol: /^https?$/ }).optional(),
    model: z.object({ name: z.string(), version: z.string().optional() }).strict().optional(),
    /**
     * A built-in router, run by the executor itself (no hop): its strategy, and its name in
     * Redis, which its own Service (for `/arms`) shares. A router with a `url` is called instead.
     */
    router: z
      .object({
        node: nodeKey,
        strategy,
        /** What choosing each child costs a bandit (in the reward's units). */
        costs: armCosts.optional(),
      })
      .strict()
      .optional(),
    join: z
      .object({ type: z.enum(joinTypes).default('inner'), windowMs: z.number().int().optional() })
      .strict()
      .optional(),
    /** An outlier node: its threshold, and for the built-in detector its drift reference. */
    outlier: z
      .object({ threshold: z.number().min(0).optional(), reference: z.string().optional() })
      .strict()
      .optional(),
    data: z.enum(['parent', 'request']).default('parent'),
    children: z.array(plannedEdge).default([]),
  })
  .strict();

const graphPlan = z
  .object({
    /** `<namespace>/<name>`: in the keys of the paths kept for rewards. */
    graph: z.string().regex(/^[a-z0-9-]{1,63}\/[a-z0-9-]{1,63}$/, 'must be <namespace>/<name>'),
    root: z.string(),
    timeoutMs: z.number().int().min(1).max(600_000).default(30_000),
    nodes: z.array(plannedNode).min(1),
  })
  .strict()
  .superRefine((plan, ctx) => {
    const asSpec: MLGraphSpec = {
      root: plan.root,
      nodes: plan.nodes.map((n) => ({
        name: n.name,
        kind: n.kind,
        children: n.children,
        // The kind's own settings are checked above; graphProblems needs a model's "where".
        ...(n.kind === 'model' ? { model: { name: n.model?.name ?? '', url: n.url } } : {}),
        ...(n.kind === 'transform' && n.url !== undefined ? { transform: { url: n.url } } : {}),
        ...(n.kind === 'outlier'
          ? {
              outlier:
                n.outlier?.reference === undefined
                  ? { url: n.url }
                  : { reference: n.outlier.reference },
            }
          : {}),
        ...(n.kind === 'join' ? { join: n.join } : {}),
        ...(n.kind === 'router' && n.router !== undefined
          ? { router: { strategy: n.router.strategy } }
          : {}),
      })),
    };
    const shaped = mlGraphSpec.safeParse(asSpec);
    const problems = shaped.success
      ? graphProblems(shaped.data)
      : shaped.error.issues.map((i) => ({ node: i.path.join('.'), message: i.message }));
    for (const problem of problems)
      ctx.addIssue({ code: 'custom', message: `node ${problem.node}: ${problem.message}` });
    for (const node of plan.nodes) {
      // A join without a url is built in: the executor gathers its inputs itself.
      const needsUrl =
        node.kind !== 'outlier' &&
        node.kind !== 'join' &&
        !(node.kind === 'router' && node.router !== undefined);
      if (needsUrl && node.url === undefined)
        ctx.addIssue({ code: 'custom', message: `node ${node.name}: needs a url` });
      if (node.kind === 'model' && node.model === undefined)
        ctx.addIssue({ code: 'custom', message: `node ${node.name}: needs model.name` });
      const costs = node.router?.costs ?? {};
      const children = node.children.map((c) => c.node);
      for (const child of Object.keys(costs).filter((c) => !children.includes(c)))
        ctx.addIssue({
          code: 'custom',
          message: `node ${node.name}: router.costs names ${child}, not a child`,
        });
    }
  });

type GraphPlan = z.output<typeof graphPlan>;
type PlannedNode = GraphPlan['nodes'][number];
type PlannedEdge = PlannedNode['children'][number];

export { graphPlan };
export type { GraphPlan, PlannedNode, PlannedEdge };
