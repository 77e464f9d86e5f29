import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GraphRun, graphShape } from '../../../shared/mlgraph/graph-run.js';
import type { Step } from '../../../shared/mlgraph/graph-run.js';
import { graphPlan } from '../../../shared/messages/graph-plan.js';
import type { GraphPlan } from '../../../shared/messages/graph-plan.js';

type Kind = 'model' | 'router' | 'join';
interface Shape {
  kind: Kind;
  children: string[];
}

/** A plan from node name -> kind and children (the first node is the root). */
function planOf(shapes: Record<string, Shape>, joinType: 'inner' | 'any' = 'inner'): GraphPlan {
  return graphPlan.parse({
    graph: 'ns/g',
    root: Object.keys(shapes)[0],
    nodes: Object.entries(shapes).map(([name, { kind, children }]) => ({
      name,
      kind,
      url: 'http://x.example',
      ...(kind === 'model' ? { model: { name } } : {}),
      ...(kind === 'join' ? { join: { type: joinType } } : {}),
      children: children.map((node) => ({ node })),
    })),
  });
}

/** What is known of each node so far: the children it sent to, or a soft failure. */
type Decisions = Map<string, readonly string[] | 'failed'>;

/**
 * Brute force, independent of GraphRun: every path from the root to `join` whose edges the
 * decisions so far allow (an undecided node may send anywhere); the inputs the join may get are
 * the distinct last hops of those paths.
 */
function mostInputs(
  shapes: Record<string, Shape>,
  decisions: Decisions,
  dropped: ReadonlySet<string>,
  join: string,
): number {
  const root = Object.keys(shapes)[0]!;
  const lastHops = new Set<string>();
  const walk = (at: string): void => {
    const decided = decisions.get(at);
    if (decided === 'failed') return;
    for (const child of shapes[at]!.children) {
      if (decided !== undefined && !decided.includes(child)) continue;
      if (dropped.has(`${at}>${child}`)) continue;
      if (child === join) lastHops.add(at);
      else walk(child);
    }
  };
  walk(root);
  return lastHops.size;
}

/** A random DAG: node i's parents come before it; only joins have more than one. */
const shapes = fc
  .array(
    fc.record({
      kind: fc.constantFrom<Kind>('model', 'router', 'join'),
      parents: fc.uniqueArray(fc.nat(), { minLength: 1, maxLength: 3 }),
    }),
    { minLength: 1, maxLength: 7 },
  )
  .map((drawn) => {
    const result: Record<string, Shape> = { n0: { kind: 'router', children: [] } };
    drawn.forEach(({ kind, parents }, i) => {
      const name = `n${i + 1}`;
      const candidates = [...new Set(parents.map((p) => p % (i + 1)))];
      const from = kind === 'join' ? candidates : candidates.slice(0, 1);
      result[name] = { kind: kind === 'join' && from.length < 2 ? 'model' : kind, children: [] };
      for (const p of from) result[`n${p}`]!.children.push(name);
    });
    // A router needs children to choose from.
    for (const shape of Object.values(result))
      if (shape.kind === 'router' && shape.children.length === 0) shape.kind = 'model';
    return result;
  });

interface Walk {
  /** Inputs each join got, and the tightest bound it was told. */
  received: Map<string, number>;
  told: Map<string, number>;
  fired: Set<string>;
  lateInputs: number;
  boundChecks: number;
}

/** Runs the graph with random choices and order, checking every bound against brute force. */
function walkRandomly(g: Record<string, Shape>, random: () => number): Walk {
  const run = new GraphRun<string>(graphShape(planOf(g)), 'request');
  const decisions: Decisions = new Map();
  const dropped = new Set<string>();
  const walk: Walk = {
    received: new Map(),
    told: new Map(),
    fired: new Set(),
    lateInputs: 0,
    boundChecks: 0,
  };
  const queue: Step<string>[] = [];
  // Bounds are checked when the executor would send them: what the decisions so far allow.
  const push = (steps: Step<string>[]) => {
    for (const step of steps) {
      if (step.kind === 'join-input') check(step.node, step.pending + 1);
      if (step.kind === 'join-bound') check(step.node, step.inputs);
      queue.push(step);
    }
  };
  const check = (join: string, bound: number) => {
    walk.boundChecks += 1;
    expect(bound, `bound of ${join}`).toBe(mostInputs(g, decisions, dropped, join));
    walk.told.set(join, Math.min(walk.told.get(join) ?? Infinity, bound));
  };
  const fire = (join: string) => {
    const told = walk.told.get(join) ?? Infinity;
    if (walk.fired.has(join) || (walk.received.get(join) ?? 0) < told) return;
    walk.fired.add(join);
    decisions.set(join, g[join]!.children);
    push(run.completed(join, `joined ${join}`));
  };
  push(run.start());
  while (queue.length > 0) {
    const step = queue.splice(Math.floor(random() * queue.length), 1)[0]!;
    if (step.kind === 'join-bound') {
      fire(step.node);
    } else if (step.kind === 'join-input') {
      if (random() < 0.2) {
        dropped.add(`${step.from}>${step.node}`);
        push(run.failedSoftly(step.from, step.node));
        continue;
      }
      if (walk.fired.has(step.node)) walk.lateInputs += 1;
      walk.received.set(step.node, (walk.received.get(step.node) ?? 0) + 1);
      fire(step.node);
    } else if (g[step.node]!.kind === 'router') {
      const route = g[step.node]!.children.filter(() => random() < 0.6);
      decisions.set(step.node, route);
      push(run.completed(step.node, 'routed', route));
    } else if (random() < 0.15) {
      decisions.set(step.node, 'failed');
      push(run.failedSoftly(step.from, step.node));
    } else {
      decisions.set(step.node, g[step.node]!.children);
      push(run.completed(step.node, `answer of ${step.node}`));
    }
  }
  return walk;
}

describe('GraphRun: pending requests for joins', () => {
  it('tells every join the most inputs any remaining choice allows, and every join completes', () => {
    let checks = 0;
    fc.assert(
      fc.property(shapes, fc.integer(), (g, seed) => {
        let state = seed;
        const random = () => {
          state = (Math.imul(state, 1_103_515_245) + 12_345) | 0;
          return ((state >>> 8) & 0xffff) / 0x10000;
        };
        const walk = walkRandomly(g, random);
        checks += walk.boundChecks;
        // No input after its join fired, and no join left waiting for its deadline.
        expect(walk.lateInputs).toBe(0);
        for (const [join, received] of walk.received) {
          if (received > 0) expect(walk.fired.has(join), `${join} fired`).toBe(true);
        }
      }),
      { numRuns: 500 },
    );
    expect(checks).toBeGreaterThan(200);
  });

  // root R forks to A and to router S, which takes B of B and C; J joins A, B and C.
  const fork: Record<string, Shape> = {
    r: { kind: 'model', children: ['a', 's'] },
    a: { kind: 'model', children: ['j'] },
    s: { kind: 'router', children: ['b', 'c'] },
    b: { kind: 'model', children: ['j'] },
    c: { kind: 'model', children: ['j'] },
    j: { kind: 'join', children: [] },
  };

  it('counts the routes not yet decided, and the ones not taken (hand-drawn)', () => {
    const run = new GraphRun<string>(graphShape(planOf(fork)), 'x');
    run.start();
    expect(run.completed('r', 'y').map((s) => s.node)).toEqual(['a', 's']);
    // A answers before S decides: B and C may both still come.
    expect(run.completed('a', 'ya')).toMatchObject([
      { kind: 'join-input', node: 'j', from: 'a', pending: 2 },
    ]);
    // S takes only B: C is dead; J, told 3, now has at most 2 — it hears of it now.
    expect(run.completed('s', 'y', ['b'])).toEqual([
      expect.objectContaining({ kind: 'call', node: 'b' }),
      { kind: 'join-bound', node: 'j', inputs: 2 },
    ]);
    expect(run.state('c')).toBe('dead');
    expect(run.completed('b', 'yb')).toMatchObject([{ kind: 'join-input', node: 'j', pending: 1 }]);
  });

  it('sends no bound when the routes are decided before the inputs go', () => {
    const run = new GraphRun<string>(graphShape(planOf(fork)), 'x');
    run.start();
    run.completed('r', 'y');
    run.completed('s', 'y', ['c']);
    expect(run.completed('c', 'yc')).toMatchObject([{ kind: 'join-input', pending: 1 }]);
    expect(run.completed('a', 'ya')).toMatchObject([{ kind: 'join-input', pending: 1 }]);
  });

  it('a join whose every route is not taken never runs, nor does what follows it', () => {
    const g: Record<string, Shape> = {
      s: { kind: 'router', children: ['a', 'b', 'x'] },
      a: { kind: 'model', children: ['j'] },
      b: { kind: 'model', children: ['j'] },
      j: { kind: 'join', children: ['after'] },
      after: { kind: 'model', children: [] },
      x: { kind: 'model', children: [] },
    };
    const run = new GraphRun<string>(graphShape(planOf(g)), 'x');
    run.start();
    expect(run.completed('s', 'y', ['x']).map((s) => s.node)).toEqual(['x']);
    expect(['a', 'b', 'j', 'after'].map((n) => run.state(n))).toEqual([
      'dead',
      'dead',
      'dead',
      'dead',
    ]);
    run.completed('x', 'yx');
    expect([...run.results()]).toEqual([['x', 'yx']]);
  });

  it('joins of joins: the outer join counts an inner join as one input', () => {
    const g: Record<string, Shape> = {
      s: { kind: 'model', children: ['a', 'b', 'c'] },
      a: { kind: 'model', children: ['j1'] },
      b: { kind: 'model', children: ['j1'] },
      c: { kind: 'model', children: ['j2'] },
      j1: { kind: 'join', children: ['j2'] },
      j2: { kind: 'join', children: [] },
    };
    const run = new GraphRun<string>(graphShape(planOf(g)), 'x');
    run.start();
    run.completed('s', 'y');
    expect(run.completed('c', 'yc')).toMatchObject([{ node: 'j2', pending: 1 }]);
    expect(run.completed('a', 'ya')).toMatchObject([{ node: 'j1', pending: 1 }]);
    expect(run.completed('j1', 'joined')).toMatchObject([{ node: 'j2', from: 'j1', pending: 1 }]);
  });

  it('a soft failure skips the node and what only it leads to, and lowers the bound', () => {
    const run = new GraphRun<string>(graphShape(planOf(fork)), 'x');
    run.start();
    run.completed('r', 'y');
    run.completed('s', 'y', ['b', 'c']);
    expect(run.completed('b', 'yb')).toMatchObject([{ node: 'j', pending: 2 }]);
    expect(run.failedSoftly('s', 'c')).toEqual([{ kind: 'join-bound', node: 'j', inputs: 2 }]);
    expect(run.skipped()).toEqual(['c']);
    expect(run.completed('a', 'ya')).toMatchObject([{ node: 'j', pending: 1 }]);
  });

  it('an any join fires on its first input and takes no other', () => {
    const run = new GraphRun<string>(graphShape(planOf(fork, 'any')), 'x');
    run.start();
    run.completed('r', 'y');
    expect(run.completed('a', 'ya')).toMatchObject([{ node: 'j', pending: 0 }]);
    run.completed('j', 'first');
    expect(run.completed('s', 'y', ['b'])).toMatchObject([{ kind: 'call', node: 'b' }]);
    expect(run.completed('b', 'yb')).toEqual([]);
  });

  it('a node with data: request gets the graph request, not its parent answer', () => {
    const plan = planOf({
      a: { kind: 'model', children: ['b'] },
      b: { kind: 'model', children: [] },
    });
    plan.nodes[1]!.data = 'request';
    const run = new GraphRun<string>(graphShape(plan), 'the request');
    run.start();
    expect(run.completed('a', 'answer of a')).toMatchObject([{ node: 'b', input: 'the request' }]);
  });
});
