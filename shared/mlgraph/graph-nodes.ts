/**
 * A graph plan's nodes as the executor runs them, made once per graph version (not per
 * request): each node's kind with exactly what that kind needs — the URLs it is called at, a
 * built-in router or outlier detector, a built-in join's type and window — so the request path
 * neither builds URLs nor asserts that a kind's settings are there.
 */
import { ConfigError } from '../errors/index.js';
import { endpoint } from '../http/index.js';
import type { GraphPlan, PlannedEdge, PlannedNode } from '../messages/graph-plan.js';
import type { OutlierNode } from './outlier-node.js';
import type { Router } from './router.js';
import { learns } from './strategies.js';

type JoinType = 'inner' | 'any' | 'outer';

interface NodeBase {
  readonly name: string;
  readonly children: readonly PlannedEdge[];
}

type GraphNode = NodeBase &
  (
    | { readonly kind: 'model'; readonly inferUrl: string }
    | {
        readonly kind: 'router';
        readonly router: Router;
        /** Only conditions read the body: the others need not parse it. */
        readonly reads: boolean;
        readonly learns: boolean;
      }
    | {
        readonly kind: 'remote-router';
        readonly predictUrl: string;
        readonly rewardUrl: string;
        /** Its call's own headers: JSON, and `mlgraph-routable-nodes` (its children). */
        readonly headers: Readonly<Record<string, string>>;
      }
    /** A join without a url: the executor gathers its inputs (join-gather.ts). */
    | { readonly kind: 'join'; readonly type: JoinType; readonly windowMs: number | undefined }
    | {
        readonly kind: 'remote-join';
        readonly type: JoinType;
        readonly windowMs: number | undefined;
        readonly predictUrl: string;
        /** `<url>/joins/`: the prediction id and `/bound` follow. */
        readonly joinsUrl: string;
      }
    | { readonly kind: 'transform'; readonly url: string }
    | { readonly kind: 'outlier'; readonly detector: OutlierNode }
    | { readonly kind: 'remote-outlier'; readonly url: string }
  );

type NodeOf<K extends GraphNode['kind']> = Extract<GraphNode, { kind: K }>;

function needUrl(node: PlannedNode): string {
  if (node.url === undefined) throw new ConfigError(`node ${node.name}: needs a url`);
  return node.url;
}

function modelPath(node: PlannedNode): string {
  if (node.model === undefined) throw new ConfigError(`node ${node.name}: needs model.name`);
  const { name, version } = node.model;
  const versioned = version === undefined ? '' : `/versions/${encodeURIComponent(version)}`;
  return `v2/models/${encodeURIComponent(name)}${versioned}/infer`;
}

function compile(
  node: PlannedNode,
  builtins: {
    routers: ReadonlyMap<string, Router>;
    outliers: ReadonlyMap<string, OutlierNode>;
  },
): GraphNode {
  const base = { name: node.name, children: node.children };
  switch (node.kind) {
    case 'model':
      return { ...base, kind: 'model', inferUrl: endpoint(needUrl(node), modelPath(node)) };
    case 'router': {
      const router = builtins.routers.get(node.name);
      if (router !== undefined && node.router !== undefined) {
        const { strategy } = node.router;
        return {
          ...base,
          kind: 'router',
          router,
          reads: strategy.kind === 'condition',
          learns: learns(strategy),
        };
      }
      const url = needUrl(node);
      return {
        ...base,
        kind: 'remote-router',
        predictUrl: endpoint(url, 'predict'),
        rewardUrl: endpoint(url, 'reward'),
        headers: {
          'content-type': 'application/json',
          'mlgraph-routable-nodes': node.children.map((c) => c.node).join(','),
        },
      };
    }
    case 'join': {
      const type = node.join?.type ?? 'inner';
      const windowMs = node.join?.windowMs;
      if (type === 'outer' && windowMs === undefined)
        throw new ConfigError(`node ${node.name}: an outer join needs join.windowMs`);
      if (node.url === undefined) return { ...base, kind: 'join', type, windowMs };
      return {
        ...base,
        kind: 'remote-join',
        type,
        windowMs,
        predictUrl: endpoint(node.url, 'predict'),
        joinsUrl: endpoint(node.url, 'joins/'),
      };
    }
    case 'transform':
      return { ...base, kind: 'transform', url: needUrl(node) };
    case 'outlier': {
      const detector = builtins.outliers.get(node.name);
      if (detector !== undefined) return { ...base, kind: 'outlier', detector };
      return { ...base, kind: 'remote-outlier', url: needUrl(node) };
    }
  }
}

/** Every node of the plan, by name. */
function graphNodes(
  plan: GraphPlan,
  builtins: {
    routers: ReadonlyMap<string, Router>;
    outliers: ReadonlyMap<string, OutlierNode>;
  },
): ReadonlyMap<string, GraphNode> {
  return new Map(plan.nodes.map((n) => [n.name, compile(n, builtins)]));
}

export { graphNodes };
export type { GraphNode, NodeOf, JoinType };
