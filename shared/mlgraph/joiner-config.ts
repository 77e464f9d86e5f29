/** joiner's settings, read once at start-up (see docs/mlgraph.md). */
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { ConfigError } from '../errors/index.js';
import { childName, nodeKey } from '../crds/route-strategy.js';

const schema = z.object({
  MLGRAPH_NODE: nodeKey.optional(),
  K_SERVICE: childName.optional(),
  MLGRAPH_JOIN_DEADLINE_MS: z.coerce.number().int().min(1).max(3_600_000).default(2_000),
  MLGRAPH_JOIN_KEEP_SECONDS: z.coerce.number().int().min(1).default(600),
  MLGRAPH_MAX_INPUTS: z.coerce.number().int().min(1).max(1_000).default(16),
  K_SINK: z.url({ protocol: /^https?$/ }).optional(),
});

interface JoinerConfig {
  node: string;
  deadlineMs: number;
  keepMs: number;
  /** Inputs one transaction may have: `mlgraph-pending-requests` above this - 1 is refused. */
  maxInputs: number;
  sink: string | undefined;
}

function loadJoinerConfig(env: Env = process.env): JoinerConfig {
  const raw = readEnv(schema, env);
  const node = raw.MLGRAPH_NODE ?? raw.K_SERVICE;
  if (node === undefined) {
    throw new ConfigError('MLGRAPH_NODE: required (the node name) when K_SERVICE is not set');
  }
  return {
    node,
    deadlineMs: raw.MLGRAPH_JOIN_DEADLINE_MS,
    keepMs: raw.MLGRAPH_JOIN_KEEP_SECONDS * 1000,
    maxInputs: raw.MLGRAPH_MAX_INPUTS,
    sink: raw.K_SINK,
  };
}

export { loadJoinerConfig };
export type { JoinerConfig };
