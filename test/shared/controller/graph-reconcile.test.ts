/** The MLGraph controller's pure part: the Services a graph asks for, and the decision. */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { WorkerSettings } from '../../../shared/controller/knative-service.js';
import { desiredGraph } from '../../../shared/controller/graph-desired.js';
import type { GraphObject } from '../../../shared/controller/graph-desired.js';
import { reconcileGraph } from '../../../shared/controller/graph-reconcile.js';
import type { GraphAction } from '../../../shared/controller/graph-reconcile.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { graphPlan } from '../../../shared/messages/graph-plan.js';
import { mergePatch } from '../../../local/apiserver/index.js';

const settings: WorkerSettings = {
  image: 'edgeai:test',
  upstreamStatusUrl: undefined,
  workerSecret: 'edgeai-workers',
};
const options = { heartbeatMs: 3_600_000 };
const now = new Date('2026-11-22T10:00:00Z');
const later = new Date('2026-11-22T10:00:05Z');

function graph(spec: unknown, name = 'g', generation = 1): GraphObject {
  return {
    metadata: { name, namespace: 'ns', uid: 'u-g', generation, resourceVersion: '3' },
    spec,
  };
}

/** A router over two models whose answers a join gathers, then a transform. */
const ensemble = {
  root: 'pick',
  timeoutMs: 5000,
  nodes: [
    {
      name: 'pick',
      kind: 'router',
      router: { strategy: { kind: 'thompson' } },
      children: [{ node: 'small' }, { node: 'large', retries: 2, dependency: 'Soft' }],
    },
    {
      name: 'small',
      kind: 'model',
      model: { name: 'digits', service: 'small-oip' },
      children: [{ node: 'merge' }],
    },
    {
      name: 'large',
      kind: 'model',
      model: { name: 'digits', version: '2', jointInferenceService: 'helmet' },
      children: [{ node: 'merge', timeoutMs: 900 }],
    },
    { name: 'merge', kind: 'join', children: [{ node: 'shape' }] },
    { name: 'shape', kind: 'transform', transform: { url: 'http://shape.example/t' } },
  ],
};

/** A spec to change in tests: any field of any node may be set. */
type Loose = { nodes: Array<Record<string, unknown> & { children: Array<{ node: string }> }> };

type EnvVar = { name: string; value: string };
const containerOf = (service: KubeObject) =>
  (
    service['spec'] as {
      template: {
        metadata: { labels: Record<string, string> };
        spec: { containers: Array<{ env: EnvVar[]; envFrom?: unknown; image: string }> };
      };
    }
  ).template.spec.containers[0]!;
const envOf = (service: KubeObject) =>
  Object.fromEntries(containerOf(service).env.map((e) => [e.name, e.value]));

function valid(g: GraphObject) {
  const desired = desiredGraph(g, settings);
  if (!desired.valid) throw new Error(desired.message);
  return desired;
}

describe('desiredGraph', () => {
  it('asks for the executor and a Service per built-in router, owned by the graph; none for a built-in join', () => {
    const { services } = valid(graph(ensemble));
    // The join runs in the executor: no joiner Service.
    expect(services.map((s) => s.metadata.name)).toEqual(['g', 'g-pick']);
    for (const service of services) {
      expect(service.metadata.ownerReferences).toEqual([
        {
          apiVersion: 'edgeai.io/v1alpha1',
          kind: 'MLGraph',
          name: 'g',
          uid: 'u-g',
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
      expect(service.metadata.annotations).toEqual({ 'edgeai.io/generation': '1' });
      expect(containerOf(service)).toMatchObject({
        image: 'edgeai:test',
        envFrom: [{ secretRef: { name: 'edgeai-workers', optional: true } }],
        readinessProbe: { httpGet: { path: '/health/readiness' } },
      });
    }
    const [executor, pick] = services;
    expect(executor!.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'edgeai',
      'edgeai.io/mlgraph': 'g',
      'edgeai.io/mlgraph-node': 'executor',
    });
    expect(pick!.metadata.labels).toMatchObject({
      'edgeai.io/mlgraph-node': 'pick',
      'networking.knative.dev/visibility': 'cluster-local',
    });
    // Its Redis name is namespaced: graphs of two namespaces sharing a Redis keep apart.
    expect(envOf(pick!)).toEqual({
      FUNCTION_TARGET: 'router',
      MLGRAPH_NODE: 'ns.g-pick',
      MLGRAPH_CHILDREN: 'small,large',
      MLGRAPH_ROUTE: '{"kind":"thompson"}',
    });
  });

  it("gives the executor the plan, every node at the URL it answers at, in the executor's schema", () => {
    const { services } = valid(graph(ensemble));
    const env = envOf(services[0]!);
    expect(env['FUNCTION_TARGET']).toBe('router');
    const plan = graphPlan.parse(JSON.parse(env['MLGRAPH_GRAPH']!));
    expect(plan).toMatchObject({ graph: 'ns/g', root: 'pick', timeoutMs: 5000 });
    const byName = Object.fromEntries(plan.nodes.map((n) => [n.name, n]));
    // A built-in router runs in the executor, on the Redis state of its Service.
    expect(byName['pick']).toEqual({
      name: 'pick',
      kind: 'router',
      router: { node: 'ns.g-pick', strategy: { kind: 'thompson' } },
      data: 'parent',
      children: [
        { node: 'small', retries: 0, dependency: 'Hard' },
        { node: 'large', retries: 2, dependency: 'Soft' },
      ],
    });
    expect(byName['small']).toMatchObject({
      url: 'http://small-oip.ns.svc.cluster.local',
      model: { name: 'digits' },
    });
    expect(byName['large']).toMatchObject({
      url: 'http://helmet-edge.ns.svc.cluster.local',
      model: { name: 'digits', version: '2' },
      children: [{ node: 'merge', timeoutMs: 900, retries: 0, dependency: 'Hard' }],
    });
    // A built-in join has no URL: the executor gathers its inputs itself.
    expect(byName['merge']).toMatchObject({ join: { type: 'inner' } });
    expect(byName['merge']?.url).toBeUndefined();
    expect(byName['shape']).toMatchObject({ url: 'http://shape.example/t', kind: 'transform' });
  });

  it("passes a router's arm costs to the executor's plan, and the fixed ones to the router's Service", () => {
    const costed = structuredClone(ensemble) as Loose;
    costed.nodes[0]!['router'] = {
      strategy: { kind: 'thompson' },
      costs: { large: { perRequest: 0.1, perLatencySecond: 5 }, small: { perLatencySecond: 1 } },
    };
    const { services } = valid(graph(costed));
    const plan = graphPlan.parse(JSON.parse(envOf(services[0]!)['MLGRAPH_GRAPH']!));
    expect(plan.nodes[0]?.router).toEqual({
      node: 'ns.g-pick',
      strategy: { kind: 'thompson' },
      costs: { large: { perRequest: 0.1, perLatencySecond: 5 }, small: { perLatencySecond: 1 } },
    });
    // The router's own Service routes nothing and measures no latency: it shows the fixed costs.
    expect(JSON.parse(envOf(services[1]!)['MLGRAPH_ARM_COSTS']!)).toEqual({
      large: { perRequest: 0.1 },
    });
    // Without costs, neither carries any.
    const blind = valid(graph(ensemble)).services;
    expect(envOf(blind[1]!)['MLGRAPH_ARM_COSTS']).toBeUndefined();
    expect(
      graphPlan.parse(JSON.parse(envOf(blind[0]!)['MLGRAPH_GRAPH']!)).nodes[0]?.router?.costs,
    ).toBeUndefined();
  });

  it('deploys no Service for a router or joiner of your own, an outer join waits its window, and an outlier keeps its threshold', () => {
    const spec = {
      root: 'pick',
      nodes: [
        {
          name: 'pick',
          kind: 'router',
          router: { url: 'https://mine.example/route' },
          children: [{ node: 'm' }, { node: 'odd' }],
        },
        {
          name: 'm',
          kind: 'model',
          model: { name: 'x', url: 'https://oip.example' },
          children: [{ node: 'j' }],
        },
        {
          name: 'odd',
          kind: 'outlier',
          outlier: { threshold: 3, url: 'http://scorer.example' },
          children: [{ node: 'j' }],
        },
        { name: 'j', kind: 'join', join: { type: 'outer', windowMs: 250 } },
      ],
    };
    const { services } = valid(graph(spec));
    // The outer join is built in: the executor holds its window.
    expect(services.map((s) => s.metadata.name)).toEqual(['g']);
    const plan = graphPlan.parse(JSON.parse(envOf(services[0]!)['MLGRAPH_GRAPH']!));
    expect(plan.timeoutMs).toBe(30_000);
    const byName = Object.fromEntries(plan.nodes.map((n) => [n.name, n]));
    expect(byName['pick']?.url).toBe('https://mine.example/route');
    expect(byName['m']?.url).toBe('https://oip.example');
    expect(byName['odd']).toMatchObject({ outlier: { threshold: 3 } });
    expect(byName['odd']?.url).toBe('http://scorer.example');
    expect(byName['j']).toMatchObject({ join: { type: 'outer', windowMs: 250 } });
    expect(byName['j']?.url).toBeUndefined();
    // A joiner of your own is called at its URL, and deployed by no one here.
    const own = structuredClone(spec) as unknown as Loose;
    own.nodes[3]!['join'] = { url: 'http://joins.example' };
    const withOwn = valid(graph(own));
    expect(withOwn.services.map((s) => s.metadata.name)).toEqual(['g']);
    const ownPlan = graphPlan.parse(JSON.parse(envOf(withOwn.services[0]!)['MLGRAPH_GRAPH']!));
    expect(ownPlan.nodes.find((n) => n.name === 'j')?.url).toBe('http://joins.example');
  });

  it('defaults the route to static and leaves out envFrom without a worker Secret', () => {
    const spec = structuredClone(ensemble);
    delete (spec.nodes[0] as { router?: unknown }).router;
    const desired = desiredGraph(graph(spec), { ...settings, workerSecret: undefined });
    if (!desired.valid) throw new Error(desired.message);
    expect(envOf(desired.services[1]!)['MLGRAPH_ROUTE']).toBe('{"kind":"static"}');
    expect(containerOf(desired.services[1]!).envFrom).toBeUndefined();
  });

  it.each<[string, (s: Loose) => unknown, string[]]>([
    [
      'an edge back to the root',
      (s) => s.nodes[4]!.children.push({ node: 'pick' }),
      ['node pick: the root has parents (shape)'],
    ],
    [
      'a cycle through a join',
      (s) => s.nodes[4]!.children.push({ node: 'merge' }),
      ['node pick: the graph has a cycle'],
    ],
    [
      'a dangling child',
      (s) => (s.nodes[3]!.children[0]!.node = 'nowhere'),
      ['node merge: child nowhere is not a node'],
    ],
    [
      'a strategy naming a stranger',
      (s) => (s.nodes[0]!['router'] = { strategy: { kind: 'weighted', weights: { tiny: 1 } } }),
      ['node pick: router.strategy names tiny, not a child'],
    ],
    ['a field the schema refuses', (s) => (s.nodes[1]!['kind'] = 'oracle'), ['node small: kind: ']],
  ])('is InvalidGraph for %s, naming the node', (_, breakIt, expected) => {
    const spec = structuredClone(ensemble) as unknown as Loose;
    for (const n of spec.nodes) n.children ??= [];
    breakIt(spec);
    const desired = desiredGraph(graph(spec), settings);
    expect(desired.valid).toBe(false);
    if (desired.valid) return;
    expect(desired.reason).toBe('InvalidGraph');
    for (const text of expected) expect(desired.message).toContain(text);
  });

  it('lists every problem, and a node whose Service name would be too long', () => {
    const long = 'n'.repeat(30);
    const spec: { root: string; nodes: Array<Record<string, unknown>> } = {
      root: long,
      nodes: [
        { name: long, kind: 'router', children: [{ node: 'a' }, { node: 'ghost' }] },
        { name: 'a', kind: 'model' },
      ],
    };
    const desired = desiredGraph(graph(spec), settings);
    expect(desired).toMatchObject({ valid: false, reason: 'InvalidGraph' });
    if (desired.valid) return;
    expect(desired.message.split('; ')).toEqual([
      `node ${long}: child ghost is not a node`,
      'node a: a model node needs model with exactly one of url, service, jointInferenceService',
    ]);
    const fixed = structuredClone(spec);
    fixed.nodes[0]!['children'] = [{ node: 'a' }];
    fixed.nodes[1] = { name: 'a', kind: 'model', model: { name: 'a', url: 'http://a.example' } };
    const graphName = 'g'.repeat(30);
    const tooLong = desiredGraph(graph(fixed, graphName), settings);
    expect(tooLong).toMatchObject({ valid: false, reason: 'InvalidGraph' });
    if (tooLong.valid) return;
    expect(tooLong.message).toMatch(
      new RegExp(`^node ${long}: its Service name "${graphName}-${long}" is longer than 57`),
    );
    expect(desiredGraph(graph(fixed, 'g'.repeat(26)), settings).valid).toBe(true);
  });
});

// --- The decision ---------------------------------------------------------------------------

interface State {
  graph: GraphObject;
  /** Every Knative Service in the namespace, by name. */
  services: Map<string, KubeObject>;
}

/** What reaches the API server: JSON, so keys holding `undefined` are not sent. */
const wire = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** What the reconciler reads: the Services labelled for the graph, the other names it wants. */
function observe(state: State) {
  const labelled = new Map(
    [...state.services].filter(([, s]) => s.metadata.labels?.['edgeai.io/mlgraph'] === 'g'),
  );
  const desired = desiredGraph(state.graph, settings);
  const taken = (desired.valid ? desired.services : [])
    .map((s) => s.metadata.name)
    .filter((name) => !labelled.has(name) && state.services.has(name));
  return { observed: { graph: state.graph, services: labelled, taken }, desired };
}

function pass(state: State, at: Date): GraphAction[] {
  const { observed, desired } = observe(state);
  return reconcileGraph(observed, desired, at, options);
}

/** Carries out `actions` on plain objects, as the API server would. */
function applyTo(state: State, actions: readonly GraphAction[]): State {
  let { graph: g } = state;
  const services = new Map(state.services);
  for (const action of actions) {
    if (action.kind === 'status') {
      g = {
        ...g,
        status: mergePatch(g.status ?? {}, wire(action.status)) as GraphObject['status'],
      };
    } else if (action.kind === 'create') {
      const object = wire(action.object);
      services.set(object.metadata.name, {
        ...object,
        metadata: { ...object.metadata, generation: 1 },
      });
    } else if (action.kind === 'update') {
      const stored = services.get(action.name)!;
      const next = mergePatch(stored, wire(action.patch)) as KubeObject;
      const changed = !isDeepStrictEqual(stored['spec'], next['spec']);
      next.metadata.generation = (stored.metadata.generation ?? 1) + (changed ? 1 : 0);
      services.set(action.name, next);
    } else if (action.kind === 'delete') {
      services.delete(action.name);
    }
  }
  return { graph: g, services };
}

/** What Knative Serving writes once every Service's latest revision is up. */
function rollOut(state: State): void {
  for (const s of state.services.values()) {
    if (s.metadata.labels?.['edgeai.io/mlgraph'] !== 'g') continue;
    s['status'] = {
      observedGeneration: s.metadata.generation,
      url: `http://${s.metadata.name}.ns.example.com`,
      conditions: [{ type: 'Ready', status: 'True' }],
    };
  }
}

const ready = (state: State) => state.graph.status?.conditions?.find((c) => c.type === 'Ready');
const writes = (actions: readonly GraphAction[]) => actions.filter((a) => a.kind !== 'event');
const withSpec = (state: State, spec: unknown, generation: number): State => ({
  ...state,
  graph: { ...state.graph, spec, metadata: { ...state.graph.metadata, generation } },
});

describe('reconcileGraph', () => {
  const started = (spec: unknown): State => {
    const state: State = { graph: graph(spec), services: new Map() };
    return applyTo(state, pass(state, now));
  };

  it('creates the Services, is Deploying until Knative readies them, then Ready with the URL', () => {
    let state = started(ensemble);
    expect([...state.services.keys()]).toEqual(['g', 'g-pick']);
    expect(ready(state)).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
    expect(state.graph.status).toMatchObject({ observedGeneration: 1, nodeCount: 5 });
    expect(state.graph.status?.url).toBeUndefined();
    rollOut(state);
    const actions = pass(state, later);
    const events = actions.filter((a) => a.kind === 'event');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Normal', reason: 'Ready' });
    state = applyTo(state, actions);
    expect(ready(state)).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(state.graph.status?.url).toBe('http://g.ns.example.com');
    expect(pass(state, later)).toEqual([]);
  });

  it('recreates a deleted node Service, and drops the URL while the executor is gone', () => {
    let state = started(ensemble);
    rollOut(state);
    state = applyTo(state, pass(state, later));
    state.services.delete('g-pick');
    state.services.delete('g');
    const actions = pass(state, later);
    expect(
      actions.filter((a) => a.kind === 'create').map((a) => a.kind === 'create' && a.node),
    ).toEqual(['executor', 'pick']);
    state = applyTo(state, actions);
    expect(state.graph.status?.url).toBeUndefined();
    expect(ready(state)).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
  });

  it('updates a changed node, creates a new one, deletes the Service of one removed', () => {
    let state = started(ensemble);
    rollOut(state);
    state = applyTo(state, pass(state, later));
    const spec = structuredClone(ensemble) as unknown as Loose;
    spec.nodes[0]!['router'] = { strategy: { kind: 'ucb1' } };
    // merge becomes the router's own joiner: only the executor's plan changes.
    spec.nodes[3]!['join'] = { url: 'http://joins.example' };
    spec.nodes.push({
      name: 'again',
      kind: 'router',
      router: { strategy: { kind: 'static' } },
      children: [{ node: 'last' }],
    });
    spec.nodes.push({
      name: 'last',
      kind: 'model',
      model: { name: 'x', url: 'http://x.example' },
      children: [],
    });
    spec.nodes[4]!.children = [{ node: 'again' }];
    state = withSpec(state, spec, 2);
    const summaryOf = (actions: readonly GraphAction[]) =>
      writes(actions)
        .map((a) =>
          a.kind === 'status'
            ? 'status'
            : `${a.kind} ${'name' in a ? a.name : a.object.metadata.name}`,
        )
        .sort();
    const actions = pass(state, later);
    expect(summaryOf(actions)).toEqual(
      ['status', 'update g', 'update g-pick', 'create g-again'].sort(),
    );
    state = applyTo(state, actions);
    expect(JSON.parse(envOf(state.services.get('g-pick')!)['MLGRAPH_ROUTE']!)).toEqual({
      kind: 'ucb1',
    });
    expect(state.graph.status).toMatchObject({ observedGeneration: 2, nodeCount: 7 });
    expect(ready(state)).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
    expect(pass(state, later)).toEqual([]);
    // The router removed: its Service goes.
    spec.nodes.splice(5, 2);
    spec.nodes[4]!.children = [];
    state = withSpec(state, spec, 3);
    const removed = pass(state, later);
    expect(summaryOf(removed)).toEqual(
      ['delete g-again', 'status', 'update g', 'update g-pick'].sort(),
    );
  });

  it('changes nothing for an invalid graph, names its nodes, and recovers when it is fixed', () => {
    let state = started(ensemble);
    rollOut(state);
    state = applyTo(state, pass(state, later));
    const before = structuredClone([...state.services.values()]);
    const broken = structuredClone(ensemble) as typeof ensemble & {
      nodes: Array<{ children?: Array<{ node: string }> }>;
    };
    broken.nodes[4]!.children = [{ node: 'pick' }];
    state = withSpec(state, broken, 2);
    const actions = pass(state, later);
    expect(writes(actions).map((a) => a.kind)).toEqual(['status']);
    state = applyTo(state, actions);
    expect(ready(state)).toMatchObject({ status: 'False', reason: 'InvalidGraph' });
    expect(ready(state)?.message).toContain('node pick: the root has parents (shape)');
    expect(actions).toContainEqual(
      expect.objectContaining({ type: 'Warning', reason: 'InvalidGraph' }),
    );
    expect([...state.services.values()]).toEqual(before);
    expect(pass(state, later)).toEqual([]);
    state = applyTo(withSpec(state, ensemble, 3), pass(withSpec(state, ensemble, 3), later));
    expect(ready(state)).toMatchObject({ status: 'True', reason: 'Ready' });
  });

  it("names a Service name held by someone else's Service and never writes it", () => {
    const foreign: KubeObject = { metadata: { name: 'g-pick', labels: { team: 'other' } } };
    let state: State = { graph: graph(ensemble), services: new Map([['g-pick', foreign]]) };
    state = applyTo(state, pass(state, now));
    expect(state.services.get('g-pick')).toBe(foreign);
    expect(ready(state)).toMatchObject({ status: 'False', reason: 'ServiceTaken' });
    expect(ready(state)?.message).toContain('"g-pick" (pick)');
    expect(pass(state, later)).toEqual([]);
    state.services.delete('g-pick');
    state = applyTo(state, pass(state, later));
    expect(state.services.get('g-pick')?.metadata.ownerReferences).toBeDefined();
  });

  // --- the fixpoint property ---

  const strategies = fc.constantFrom<unknown>(
    undefined,
    { kind: 'static' },
    { kind: 'thompson' },
    { kind: 'weighted', weights: { a: 1, b: 3 } },
    { kind: 'static', children: ['zz'] },
  );
  const where = fc.constantFrom<Record<string, string>>(
    { url: 'http://m.example' },
    { service: 'oip' },
    { jointInferenceService: 'jis' },
    {},
  );
  const specs = fc.record({
    strategy: strategies,
    routerUrl: fc.boolean(),
    join: fc.constantFrom('none', 'inner', 'outer', 'own'),
    a: where,
    timeoutMs: fc.option(fc.integer({ min: 1, max: 60_000 }), { nil: undefined }),
    cycle: fc.boolean(),
    extra: fc.boolean(),
  });
  type SpecChoice = typeof specs extends fc.Arbitrary<infer T> ? T : never;
  const specOf = (c: SpecChoice) => {
    const join =
      c.join === 'none'
        ? []
        : [
            {
              name: 'j',
              kind: 'join',
              join:
                c.join === 'own'
                  ? { url: 'http://j.example' }
                  : { type: c.join, windowMs: c.join === 'outer' ? 100 : undefined },
              ...(c.cycle ? { children: [{ node: 'r' }] } : {}),
            },
          ];
    const toJoin = c.join === 'none' ? {} : { children: [{ node: 'j' }] };
    return {
      root: 'r',
      timeoutMs: c.timeoutMs,
      nodes: [
        {
          name: 'r',
          kind: 'router',
          router: { strategy: c.strategy, url: c.routerUrl ? 'http://r.example' : undefined },
          children: [{ node: 'a' }, { node: 'b' }],
        },
        { name: 'a', kind: 'model', model: { name: 'm', ...c.a }, ...toJoin },
        { name: 'b', kind: 'model', model: { name: 'm', url: 'http://b.example' }, ...toJoin },
        ...join,
        ...(c.extra ? [{ name: 'x', kind: 'join' }] : []),
      ],
    };
  };
  const worlds = fc.record({
    ready: fc.boolean(),
    lost: fc.subarray(['g', 'g-r', 'g-j']),
    foreign: fc.constantFrom('none', 'g', 'g-r', 'g-j'),
  });

  it('reaches a fixpoint: after its own writes, the next pass writes nothing (property)', () => {
    fc.assert(
      fc.property(specs, specs, worlds, (first, second, world) => {
        let state = started(wire(specOf(first)));
        if (world.ready) rollOut(state);
        for (const name of world.lost) state.services.delete(name);
        if (world.foreign !== 'none' && !state.services.has(world.foreign))
          state.services.set(world.foreign, { metadata: { name: world.foreign } });
        state = withSpec(state, wire(specOf(second)), 2);
        state = applyTo(state, pass(state, later));
        expect(pass(state, new Date(later.getTime() + 1000))).toEqual([]);
        // Once Knative has readied what was written, the graph is Ready unless held back.
        rollOut(state);
        state = applyTo(state, pass(state, later));
        expect(pass(state, new Date(later.getTime() + 2000))).toEqual([]);
        const condition = ready(state);
        if (condition?.status !== 'True')
          expect(['InvalidGraph', 'ServiceTaken']).toContain(condition?.reason);
      }),
      { numRuns: 1500 },
    );
  });
});
