/** The router function in graph mode: its settings, read once at start-up (docs/mlgraph.md). */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { ConfigError } from '../errors/index.js';
import { graphPlan } from '../messages/graph-plan.js';
import type { GraphPlan } from '../messages/graph-plan.js';

const schema = z.object({
  MLGRAPH_GRAPH: z.string().min(1),
  // Where a built-in outlier node's file:// reference may be, and where http(s) ones are kept.
  MODEL_ROOT: z.string().optional(),
  MODEL_CACHE_DIR: z.string().optional(),
  MLGRAPH_PUID_TTL_SECONDS: z.coerce.number().int().min(1).default(3_600),
  // Calls to one server made in the same turn go back to back on one connection (http1-client.ts).
  MLGRAPH_PIPELINE: z.enum(['true', 'false']).default('false'),
});

interface GraphConfig {
  plan: GraphPlan;
  /** How long a prediction's path is kept for its reward. */
  puidTtlMs: number;
  modelRoot: string;
  cacheDir: string;
  /** Calls to one server made together share a connection (pipelined); off (default): one each. */
  pipeline: boolean;
}

/** Graph mode is on when MLGRAPH_GRAPH is set. */
function inGraphMode(env: Env = process.env): boolean {
  return (env['MLGRAPH_GRAPH'] ?? '') !== '';
}

function loadGraphConfig(env: Env = process.env): GraphConfig {
  const raw = readEnv(schema, env);
  let json: unknown;
  try {
    json = JSON.parse(raw.MLGRAPH_GRAPH);
  } catch {
    throw new ConfigError('MLGRAPH_GRAPH: must be JSON (the graph plan the controller writes)');
  }
  const parsed = graphPlan.safeParse(json);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) =>
      i.path.length === 0 ? i.message : `${i.path.join('.')}: ${i.message}`,
    );
    throw new ConfigError(`MLGRAPH_GRAPH: ${problems.join('; ')}`);
  }
  return {
    plan: parsed.data,
    puidTtlMs: raw.MLGRAPH_PUID_TTL_SECONDS * 1000,
    modelRoot: raw.MODEL_ROOT ?? join(process.cwd(), 'models'),
    cacheDir: raw.MODEL_CACHE_DIR ?? join(tmpdir(), 'edgeai-models'),
    pipeline: raw.MLGRAPH_PIPELINE === 'true',
  };
}

export { inGraphMode, loadGraphConfig };
export type { GraphConfig };
