/**
 * The ML-graph data plane's metadata, and the reward every node of a graph takes: one contract
 * for the router and the joiner (shared/mlgraph) and whoever calls them. The contract spells them `mlgraph/route`,
 * `mlgraph/pending-requests`; a "/" cannot appear in an HTTP header name (RFC 9110 token), so
 * over HTTP they are `mlgraph-route` and so on, and as CloudEvent extension attributes, which
 * are at most 20 lower-case alphanumerics, `mlgraphroute`, `mlgraphpuid`, `mlgraphsource` and
 * `mlgraphpending`.
 */
import { z } from 'zod';
import { ValidationError } from '../errors/index.js';
import { childName } from '../crds/route-strategy.js';
import { armCost as crdArmCost } from '../crds/mlgraph.js';

const headers = {
  puid: 'mlgraph-puid',
  route: 'mlgraph-route',
  source: 'mlgraph-source',
  pendingRequests: 'mlgraph-pending-requests',
} as const;

const extensions = {
  puid: 'mlgraphpuid',
  route: 'mlgraphroute',
  source: 'mlgraphsource',
  pendingRequests: 'mlgraphpending',
} as const;

/**
 * A prediction id: whoever starts a request may choose it; else the first node makes one. The
 * contract's own example sends a number (`"puid": 1234`): a whole number is read as its digits.
 */
const puid = z
  .union([z.string(), z.number().int().nonnegative().transform(String)])
  .pipe(
    z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'must be 1-128 of [A-Za-z0-9._:-]'),
  );

/**
 * A single-valued header, or an extension (a structured event may carry a number); a header
 * sent twice is refused.
 */
function single(value: unknown, name: string): string | number | undefined {
  if (value === undefined || typeof value === 'string' || typeof value === 'number') return value;
  throw new ValidationError(`${name}: expected one value`);
}

/** Parses `value` with `schema`, naming the header in the error. */
function parseMetadata<S extends z.ZodType>(schema: S, value: unknown, name: string): z.output<S> {
  const result = schema.safeParse(single(value, name));
  if (!result.success) {
    throw new ValidationError(
      `${name}: ${result.error.issues.map((issue) => issue.message).join('; ')}`,
    );
  }
  return result.data;
}

/**
 * `POST /reward` and the `io.edgeai.mlgraph.reward` event: a prediction's reward in [0, 1]. The
 * router learns from it; a joiner takes it (the contract has every node take it) and ignores it.
 */
const reward = z.object({ puid, reward: z.number().min(0).max(1) }).strict();

/**
 * What choosing each child costs a router that learns, in the reward's units: the bandits
 * maximise reward minus cost. `perRequest` is charged for every request routed to the child;
 * `perLatencySecond` times the child's measured latency (the executor measures it: a router of
 * its own graph only). "Accuracy minus lambda times offload" is a reward of 1 for a right answer
 * and `{"cloud": {"perRequest": lambda}}`.
 */
const armCost = crdArmCost.strict();
const armCosts = z.record(childName, armCost);
type ArmCost = z.output<typeof armCost>;
type ArmCosts = z.output<typeof armCosts>;

export { headers, extensions, puid, parseMetadata, reward, armCosts };
export type { ArmCost, ArmCosts };
