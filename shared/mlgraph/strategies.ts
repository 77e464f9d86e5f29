/**
 * How a router node of an ML graph picks the children a request goes to (the route contract of
 * the ML-graph data plane: the answer names the child nodes in `mlgraph-route`). Pure: the
 * caller passes the arms' statistics and the random draws, so every strategy is a function of
 * its inputs and can be checked by properties.
 *
 * Bandits learn from rewards in [0, 1] sent later for a prediction id; an arm's figures count
 * only the predictions that were rewarded (a prediction never rewarded says nothing about its
 * arm), so `rewarded` is the n of UCB1 and the trials of Thompson sampling's Beta posterior.
 * An arm may cost something (arm-costs.ts, in the reward's units): each bandit then ranks the
 * arms by its estimate of the reward minus that cost, so it settles on the best reward net of
 * cost, not the best reward.
 */

import type { Comparison, Strategy } from '../crds/route-strategy.js';

/** What the store knows about one child: rewarded predictions and the sum of their rewards. */
interface ArmStats {
  readonly rewarded: number;
  readonly reward: number;
  /** Predictions routed to the child, rewarded or not (0 when unknown). */
  readonly routed?: number;
}

const banditKinds: ReadonlySet<Strategy['kind']> = new Set(['epsilon-greedy', 'thompson', 'ucb1']);

/** Whether the strategy learns from rewards (its route must be remembered per prediction). */
function learns(s: Strategy): boolean {
  return banditKinds.has(s.kind);
}

function lookup(body: unknown, path: string): unknown {
  let at: unknown = body;
  for (const key of path.split('.')) {
    if (typeof at !== 'object' || at === null || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}

function holds(when: Comparison, body: unknown): boolean {
  const actual = lookup(body, when.path);
  const { value } = when;
  switch (when.op) {
    case 'exists':
      return actual !== undefined;
    case 'eq':
      return actual === value;
    case 'ne':
      return actual !== value;
    case 'in':
      return Array.isArray(value) && value.includes(actual);
    default: {
      // Order comparisons only between two numbers or two strings; anything else is false.
      const comparable =
        (typeof actual === 'number' && typeof value === 'number') ||
        (typeof actual === 'string' && typeof value === 'string');
      if (!comparable) return false;
      const [a, b] = [actual, value] as [number | string, number | string];
      if (when.op === 'lt') return a < b;
      if (when.op === 'lte') return a <= b;
      if (when.op === 'gt') return a > b;
      return a >= b;
    }
  }
}

/**
 * A Gamma(shape, 1) draw (Marsaglia and Tsang, 2000), shape >= 1 here since the posterior's
 * parameters are 1 + counts; `normal` and `uniform` are the caller's draws.
 */
function gamma(shape: number, uniform: () => number, normal: () => number): number {
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = uniform();
    if (u < 1 - 0.0331 * x ** 4) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/** A Beta(a, b) draw from two Gamma draws. */
function beta(a: number, b: number, uniform: () => number, normal: () => number): number {
  const x = gamma(a, uniform, normal);
  return x / (x + gamma(b, uniform, normal));
}

/**
 * The index of the largest score; a tie is broken uniformly (always taking the first would send
 * everything to one child while the scores are still equal, e.g. before any reward).
 */
function argmax(scores: readonly number[], uniform: () => number): number {
  const top = Math.max(...scores);
  const tied = scores.flatMap((score, i) => (score === top ? [i] : []));
  return tied.length === 1
    ? tied[0]!
    : tied[Math.min(tied.length - 1, Math.floor(uniform() * tied.length))]!;
}

const mean = (arm: ArmStats | undefined) =>
  arm === undefined || arm.rewarded === 0 ? 0 : arm.reward / arm.rewarded;

/**
 * The children this request goes to. `stats` holds each child's figures for the bandits (absent
 * children count as never rewarded); `uniform` draws in [0, 1), `normal` standard normals.
 */
function route(
  s: Strategy,
  children: readonly string[],
  input: {
    body: unknown;
    stats: ReadonlyMap<string, ArmStats>;
    /** What choosing each child costs (absent: nothing). */
    costs?: ReadonlyMap<string, number> | undefined;
    uniform: () => number;
    normal: () => number;
  },
): string[] {
  const cost = (c: string) => input.costs?.get(c) ?? 0;
  const pick = () =>
    children[Math.min(children.length - 1, Math.floor(input.uniform() * children.length))]!;
  switch (s.kind) {
    case 'static':
      return [...(s.children ?? children)];
    case 'weighted': {
      const entries = children.map((c) => [c, s.weights[c] ?? 0] as const);
      const total = entries.reduce((sum, [, w]) => sum + w, 0);
      if (!(total > 0)) return [pick()];
      let target = input.uniform() * total;
      for (const [child, weight] of entries) {
        if (target < weight) return [child];
        target -= weight;
      }
      // Rounding left the draw past the last bin: it belongs to the last weighted child.
      return [entries.filter(([, w]) => w > 0).at(-1)![0]];
    }
    case 'condition': {
      const rule = s.rules.find((r) => holds(r.when, input.body));
      return [...(rule?.route ?? s.otherwise)];
    }
    case 'epsilon-greedy': {
      if (input.uniform() < s.epsilon) return [pick()];
      return [
        children[
          argmax(
            children.map((c) => mean(input.stats.get(c)) - cost(c)),
            input.uniform,
          )
        ]!,
      ];
    }
    case 'thompson': {
      const draws = children.map((c) => {
        const arm = input.stats.get(c);
        const successes = arm?.reward ?? 0;
        const failures = Math.max(0, (arm?.rewarded ?? 0) - successes);
        return beta(1 + successes, 1 + failures, input.uniform, input.normal) - cost(c);
      });
      return [children[argmax(draws, input.uniform)]!];
    }
    case 'ucb1': {
      // Children without a reward yet come first, the least routed of them: rewards arrive
      // late or never, and counting only rewards would send everything to the first of them.
      const fresh = children.filter((c) => (input.stats.get(c)?.rewarded ?? 0) === 0);
      if (fresh.length > 0) {
        const routed = fresh.map((c) => -(input.stats.get(c)?.routed ?? 0));
        return [fresh[argmax(routed, input.uniform)]!];
      }
      const total = children.reduce((n, c) => n + input.stats.get(c)!.rewarded, 0);
      const scores = children.map((c) => {
        const arm = input.stats.get(c)!;
        return mean(arm) + Math.sqrt((2 * Math.log(total)) / arm.rewarded) - cost(c);
      });
      return [children[argmax(scores, input.uniform)]!];
    }
  }
}

export { route, learns };
export type { ArmStats };
