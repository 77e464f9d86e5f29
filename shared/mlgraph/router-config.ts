/** router's settings, read once at start-up (see docs/mlgraph.md). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { ConfigError } from '../errors/index.js';
import { childName, nodeKey, strategy, unknownChildren } from '../crds/route-strategy.js';
import type { Strategy } from '../crds/route-strategy.js';

const schema = z.object({
  // Knative sets K_SERVICE to the Service's name: the node's name unless MLGRAPH_NODE says.
  MLGRAPH_NODE: nodeKey.optional(),
  K_SERVICE: childName.optional(),
  MLGRAPH_CHILDREN: z.string().min(1),
  MLGRAPH_ROUTE: z.string().default('{"kind":"static"}'),
  MLGRAPH_PUID_TTL_SECONDS: z.coerce.number().int().min(1).default(3_600),
});

interface RouterConfig {
  node: string;
  children: string[];
  strategy: Strategy;
  puidTtlMs: number;
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
  };
}

export { loadRouterConfig };
export type { RouterConfig };
