/**
 * What choosing each child of a learning router costs, in the reward's units: the bandits
 * maximise reward minus cost (strategies.ts). A cost is declared per child (`ArmCost`): a fixed
 * `perRequest`, and `perLatencySecond` times the child's measured latency — the executor
 * measures each node's calls (an exponentially weighted mean, per replica), so latency costs
 * need a router the executor runs. A child not measured yet costs its fixed part only: it is
 * tried, then measured.
 */
import type { ArmCosts } from '../messages/mlgraph.js';

/** Each child's cost now, or undefined when none is declared (the cost-blind bandits). */
function armCostsOf(
  children: readonly string[],
  costs: ArmCosts | undefined,
  latency: ((child: string) => number | undefined) | undefined,
): () => ReadonlyMap<string, number> | undefined {
  if (costs === undefined || Object.keys(costs).length === 0) return () => undefined;
  const fixed = new Map(children.map((c) => [c, costs[c]?.perRequest ?? 0]));
  const measured = children.filter((c) => (costs[c]?.perLatencySecond ?? 0) > 0);
  if (measured.length === 0) return () => fixed;
  return () => {
    const now = new Map(fixed);
    for (const c of measured)
      now.set(c, (fixed.get(c) ?? 0) + (costs[c]?.perLatencySecond ?? 0) * (latency?.(c) ?? 0));
    return now;
  };
}

/** Each node's call latency, an exponentially weighted mean (weight `alpha` for the newest). */
interface LatencyBook {
  record(node: string, seconds: number): void;
  seconds(node: string): number | undefined;
}

function createLatencyBook(alpha = 0.05): LatencyBook {
  const means = new Map<string, number>();
  return {
    record(node, seconds) {
      const mean = means.get(node);
      means.set(node, mean === undefined ? seconds : mean + alpha * (seconds - mean));
    },
    seconds: (node) => means.get(node),
  };
}

export { armCostsOf, createLatencyBook };
export type { LatencyBook };
