import { describe, expect, it } from 'vitest';
import { graphProblems, mlGraphSpec } from '../../../shared/crds/index.js';

const model = (name: string, children: string[] = []) => ({
  name,
  kind: 'model',
  model: { name, url: 'http://models.example' },
  children: children.map((node) => ({ node })),
});

const problems = (spec: unknown) => graphProblems(mlGraphSpec.parse(spec));

describe('MLGraph validation', () => {
  it('accepts an ensemble and a router to one', () => {
    expect(
      problems({
        root: 'fork',
        nodes: [
          {
            name: 'fork',
            kind: 'router',
            router: { strategy: { kind: 'thompson' } },
            children: [{ node: 'a' }, { node: 'b' }],
          },
          model('a', ['j']),
          model('b', ['j']),
          { name: 'j', kind: 'join' },
        ],
      }),
    ).toEqual([]);
  });

  it("takes a router's arm costs for its own children, and only for a deployed router", () => {
    const router = (extra: Record<string, unknown>) => ({
      root: 'fork',
      nodes: [
        {
          name: 'fork',
          kind: 'router',
          router: { strategy: { kind: 'thompson' }, ...extra },
          children: [{ node: 'a' }, { node: 'b' }],
        },
        model('a'),
        model('b'),
      ],
    });
    const costs = { b: { perRequest: 0.1 }, a: { perLatencySecond: 2 } };
    expect(problems(router({ costs }))).toEqual([]);
    expect(mlGraphSpec.parse(router({ costs })).nodes[0]?.router?.costs).toEqual(costs);
    expect(problems(router({ costs: { c: { perRequest: 1 } } }))).toEqual([
      { node: 'fork', message: 'router.costs names c, not a child' },
    ]);
    expect(problems(router({ costs, url: 'http://mine.example' }))).toEqual([
      {
        node: 'fork',
        message: 'router.costs is for a deployed router: a router of your own (url) keeps its own',
      },
    ]);
    // A cost is not negative.
    expect(mlGraphSpec.safeParse(router({ costs: { a: { perRequest: -1 } } })).success).toBe(false);
  });

  it('names the node of every problem', () => {
    expect(problems({ root: 'a', nodes: [model('a', ['b', 'ghost']), model('b', ['a'])] })).toEqual(
      [
        { node: 'a', message: 'child ghost is not a node' },
        { node: 'a', message: 'the root has parents (b)' },
      ],
    );
    expect(
      problems({ root: 'a', nodes: [model('a', ['b']), model('b', ['c']), model('c', ['b'])] }),
    ).toEqual([{ node: 'b', message: 'has 2 parents (a, c): only a join may' }]);
    // A cycle through joins only.
    expect(
      problems({
        root: 'a',
        nodes: [
          model('a', ['j1']),
          { name: 'j1', kind: 'join', children: [{ node: 'j2' }] },
          { name: 'j2', kind: 'join', children: [{ node: 'j1' }] },
        ],
      }),
    ).toEqual([{ node: 'a', message: 'the graph has a cycle' }]);
    expect(problems({ root: 'a', nodes: [model('a'), model('island')] })).toEqual([
      { node: 'island', message: 'not reachable from the root' },
    ]);
    expect(problems({ root: 'missing', nodes: [model('a'), model('a')] })).toEqual([
      { node: 'a', message: 'declared twice' },
      { node: 'missing', message: 'the root is not a node' },
    ]);
  });

  it('checks each kind against its own settings', () => {
    expect(
      problems({
        root: 'r',
        nodes: [
          {
            name: 'r',
            kind: 'router',
            router: { strategy: { kind: 'weighted', weights: { a: 1, z: 2 } } },
            children: [{ node: 'a' }, { node: 'm' }],
          },
          {
            name: 'a',
            kind: 'join',
            join: { type: 'outer' },
            model: { name: 'x', url: 'http://x.example' },
          },
          { name: 'm', kind: 'model', model: { name: 'm' } },
        ],
      }),
    ).toEqual([
      { node: 'r', message: 'router.strategy names z, not a child' },
      { node: 'a', message: 'an outer join needs join.windowMs' },
      { node: 'a', message: 'model is set on a join node' },
      {
        node: 'm',
        message: 'a model node needs model with exactly one of url, service, jointInferenceService',
      },
    ]);
    expect(
      problems({
        root: 'r',
        nodes: [
          {
            name: 'r',
            kind: 'router',
            router: { strategy: { kind: 'epsilon-greedy' } },
            children: [{ node: 'a' }],
          },
          model('a'),
        ],
      }),
    ).toEqual([
      {
        node: 'r',
        message: 'router.strategy: epsilon: Invalid input: expected number, received undefined',
      },
    ]);
  });

  it('limits the depth', () => {
    const chain = Array.from({ length: 18 }, (_, i) => model(`n${i}`, i < 17 ? [`n${i + 1}`] : []));
    expect(problems({ root: 'n0', nodes: chain })).toEqual([
      { node: 'n17', message: 'at depth 17, deeper than 16' },
    ]);
  });
});
