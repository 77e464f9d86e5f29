/**
 * The graphs, as the plans (MLGRAPH_GRAPH) the controller would write for them, with every URL
 * resolved to the processes of this run. Built-in routers only: the executor runs them itself
 * on their Redis state, so no router hop is measured, only the executor's own work.
 */
import type { z } from 'zod';
import type { graphPlan } from '../../shared/messages/graph-plan.js';

/** What the controller writes (defaults may be left out: the executor fills them in). */
type Plan = z.input<typeof graphPlan>;

interface Members {
  small: { base: string; model: string };
  large: { base: string; model: string };
}

/** The OIP name a graph is served as: the part of `graph` after the slash. */
const routeName = (plan: Plan): string => plan.graph.split('/')[1]!;

/**
 * Every request to both members (a static router over both), their answers joined (inner): by
 * the executor itself (a built-in join, as the controller plans a join without a url), or by
 * the joiner function at `joiner` (a join of your own, through Redis).
 */
function ensemblePlan(members: Members, joiner?: string, name?: string): Plan {
  const member = (name: 'small' | 'large') => ({
    name,
    kind: 'model' as const,
    url: members[name].base,
    model: { name: members[name].model },
    children: [{ node: 'both' }],
  });
  const graph = name ?? (joiner === undefined ? 'ensemble' : 'ensemble-remote');
  return {
    graph: `bench/${graph}`,
    root: 'pick',
    nodes: [
      {
        name: 'pick',
        kind: 'router',
        router: { node: `bench.${graph}-pick`, strategy: { kind: 'static' } },
        children: [{ node: 'small' }, { node: 'large' }],
      },
      member('small'),
      member('large'),
      {
        name: 'both',
        kind: 'join',
        ...(joiner === undefined ? {} : { url: joiner }),
        join: { type: 'inner' },
      },
    ],
  };
}

/**
 * A Thompson router over two children that are both the large member: every request reaches
 * exactly one model, the same server a direct call reaches, so the difference is the graph's.
 */
function routerPlan(members: Members): Plan {
  const child = (name: 'a' | 'b') => ({
    name,
    kind: 'model' as const,
    url: members.large.base,
    model: { name: members.large.model },
  });
  return {
    graph: 'bench/router-to-one',
    root: 'pick',
    nodes: [
      {
        name: 'pick',
        kind: 'router',
        router: { node: 'bench.router-to-one-pick', strategy: { kind: 'thompson' } },
        children: [{ node: 'a' }, { node: 'b' }],
      },
      child('a'),
      child('b'),
    ],
  };
}

export { ensemblePlan, routerPlan, routeName };
export type { Members, Plan };
