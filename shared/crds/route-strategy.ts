/**
 * How a router node of an ML graph picks its children, as data: the router function reads it
 * from MLGRAPH_ROUTE, and an MLGraph's router nodes declare it (the controller checks it with
 * this schema and passes it on unchanged). The strategies themselves are shared/mlgraph's.
 */
import { z } from 'zod';

/** A child node's name: a DNS-1123 label, as Knative Service names are. */
const childName = z
  .string()
  .regex(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a DNS-1123 label (a Knative Service name)');

/**
 * A node's name in Redis (MLGRAPH_NODE): its Service name, or `<namespace>.<service>` so that
 * graphs of two namespaces sharing one Redis keep apart (the controller writes it so).
 */
const nodeKey = z
  .string()
  .max(127)
  .regex(
    /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$/,
    'must be a DNS-1123 label, or two joined by "."',
  );

const comparison = z.object({
  /** Dotted path into the request's JSON body, e.g. `parameters.tier`. */
  path: z
    .string()
    .regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, 'must be a dotted path of [A-Za-z0-9_-] keys'),
  op: z.enum(['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'exists']),
  value: z.unknown().optional(),
});

const strategy = z.discriminatedUnion('kind', [
  /** Every request to the same children (all of them unless listed). */
  z.object({ kind: z.literal('static'), children: z.array(childName).min(1).optional() }).strict(),
  /** One child per request, drawn with the given relative weights. */
  z
    .object({
      kind: z.literal('weighted'),
      weights: z.record(childName, z.number().min(0).max(1e6)),
    })
    .strict(),
  /** The first rule whose comparison holds on the body decides; else `otherwise`. */
  z
    .object({
      kind: z.literal('condition'),
      rules: z
        .array(z.object({ when: comparison, route: z.array(childName).min(1) }).strict())
        .min(1),
      otherwise: z.array(childName).min(1),
    })
    .strict(),
  /** The best mean reward, or with probability epsilon a uniformly random child. */
  z.object({ kind: z.literal('epsilon-greedy'), epsilon: z.number().min(0).max(1) }).strict(),
  /** Thompson sampling on a Beta(1 + rewards, 1 + rewarded - rewards) posterior per child. */
  z.object({ kind: z.literal('thompson') }).strict(),
  /** UCB1: mean + sqrt(2 ln N / n); unrewarded children first. */
  z.object({ kind: z.literal('ucb1') }).strict(),
]);

type Strategy = z.output<typeof strategy>;

/** Every child a strategy names must be one of the node's children: checked once at start-up. */
function unknownChildren(s: Strategy, children: readonly string[]): string[] {
  const named =
    s.kind === 'static'
      ? (s.children ?? [])
      : s.kind === 'weighted'
        ? Object.keys(s.weights)
        : s.kind === 'condition'
          ? [...s.rules.flatMap((r) => r.route), ...s.otherwise]
          : [];
  return [...new Set(named.filter((c) => !children.includes(c)))];
}

type Comparison = z.output<typeof comparison>;

export { childName, nodeKey, strategy, unknownChildren };
export type { Strategy, Comparison };
