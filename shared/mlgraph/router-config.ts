/** router's settings, read once at start-up (see docs/mlgraph.md). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { ConfigError } from '../errors/index.js';
import { childName, nodeKey, strategy, unknownChildren } from '../crds/route-strategy.js';
import type { Strategy } from '../crds/route-strategy.js';
import { armCosts } from '../messages/mlgraph.js';
import type { ArmCosts } from '../messages/mlgraph.js';

const schema = z.object({
  // Knative sets K_SERVICE to the Service's name: the node's name unless MLGRAPH_NODE says.
  MLGRAPH_NODE: nodeKey.optional(),
  K_SERVICE: childName.optional(),
  MLGRAPH_CHILDREN: z.string().min(1),
  MLGRAPH_ROUTE: z.string().default('{"kind":"static"}'),
  MLGRAPH_PUID_TTL_SECONDS: z.coerce.number().int().min(1).default(3_600),
  // What choosing each child costs a bandit: {"cloud": {"perRequest": 0.2}}.
  MLGRAPH_ARM_COSTS: z.string().optional(),
});

interface RouterConfig {
  node: string;
  children: string[];
  strategy: Strategy;
  puidTtlMs: number;
  costs: ArmCosts | undefined;
}

/**
 * MLGRAPH_ARM_COSTS: per child, a fixed cost per request. A router on its own does not call its
 * children, so it cannot measure their latency: `perLatencySecond` is for a graph's routers.
 */
function costsOf(text: string | undefined, children: readonly string[]): ArmCosts | undefined {
  if (text === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ConfigError('MLGRAPH_ARM_COSTS: must be JSON, e.g. {"cloud":{"perRequest":0.2}}');
  }
  const parsed = armCosts.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`MLGRAPH_ARM_COSTS: ${problems.join('; ')}`);
  }
  for (const [child, cost] of Object.entries(parsed.data)) {
    if (!children.includes(child))
      throw new ConfigError(`MLGRAPH_ARM_COSTS: names ${child}, not in MLGRAPH_CHILDREN`);
    if (cost.perLatencySecond !== undefined)
      throw new ConfigError(
        `MLGRAPH_ARM_COSTS: ${child}.perLatencySecond needs the graph's executor (it measures latency); a router on its own takes perRequest`,
      );
  }
  return parsed.data;
}

function loadRouterConfig(env: Env = process.env): RouterConfig {
  const raw = readEnv(schema, env);
  const node = raw.MLGRAPH_NODE ?? raw.K_SERVICE;
  if (node === undefined) {
    throw new ConfigError('MLGRAPH_NODE: required (the node name) when K_SERVICE is not set');
  }
  const children = raw.MLGRAPH_CHILDREN.split(',').map((c) => c.trim());
  for (const child of children) {
    if (!childName.safeParse(child).success) {
      throw new ConfigError(`MLGRAPH_CHILDREN: '${child}' must be a DNS-1123 label`);
    }
  }
  if (new Set(children).size !== children.length) {
    throw new ConfigError('MLGRAPH_CHILDREN: a child is named twice');
  }
  let json: unknown;
  try {
    json = JSON.parse(raw.MLGRAPH_ROUTE);
  } catch {
    throw new ConfigError('MLGRAPH_ROUTE: must be JSON, e.g. {"kind":"thompson"}');
  }
  const parsed = strategy.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'kind'}: ${i.message}`);
    throw new ConfigError(`MLGRAPH_ROUTE: ${problems.join('; ')}`);
  }
  const unknown = unknownChildren(parsed.data, children);
  if (unknown.length > 0) {
    throw new ConfigError(`MLGRAPH_ROUTE: names ${unknown.join(', ')}, not in MLGRAPH_CHILDREN`);
  }
  return {
    node,
    children,
    strategy: parsed.data,
    puidTtlMs: raw.MLGRAPH_PUID_TTL_SECONDS * 1000,
    costs: costsOf(raw.MLGRAPH_ARM_COSTS, children),
  };
}

export { loadRouterConfig };
export type { RouterConfig };
