/**
 * The router over a real Redis and real HTTP: a prediction id keeps its route, a reward reaches
 * the children that served it once, and the function answers the route contract over HTTP and
 * as CloudEvents.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotFoundError } from '../../../shared/errors/index.js';
import { eventTypes } from '../../../shared/events/index.js';
import { buildServer } from '../../../shared/http/index.js';
import { createRouteStore, createRouter, routerDefinition } from '../../../shared/mlgraph/index.js';
import { loadRouterConfig } from '../../../shared/mlgraph/router-config.js';
import type { Strategy } from '../../../shared/crds/route-strategy.js';
import { normal, seededRandom } from '../../../shared/random/index.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const children = ['small', 'large'];

describe('router', () => {
  let redis: TestRedis;
  let nodes = 0;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  function router(strategy: Strategy, seed = 1) {
    const uniform = seededRandom(seed);
    const store = createRouteStore(redis.client, {
      node: `node-${(nodes += 1)}`,
      puidTtlMs: 60_000,
    });
    return createRouter({ strategy, children, store, uniform, normal: normal(uniform) });
  }

  it('keeps the first route of a prediction id, whatever a retry would draw', async () => {
    const r = router({ kind: 'epsilon-greedy', epsilon: 1 });
    const first = await r.predict({ puid: 'p-1', body: {} });
    for (let i = 0; i < 20; i += 1) {
      expect(await r.predict({ puid: 'p-1', body: {} })).toEqual(first);
    }
    expect((await r.arms()).children.reduce((n, c) => n + c.routed, 0)).toBe(1);
  });

  it('applies a reward once, to the child the prediction went to', async () => {
    const r = router({ kind: 'epsilon-greedy', epsilon: 1 });
    const { puid, route } = await r.predict({ puid: undefined, body: {} });
    const outcomes = await Promise.all([
      r.reward(puid, 0.5),
      r.reward(puid, 0.5),
      r.reward(puid, 0.5),
    ]);
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(1);
    const arms = (await r.arms()).children;
    expect(arms.find((a) => a.name === route[0])).toMatchObject({
      routed: 1,
      rewarded: 1,
      meanReward: 0.5,
    });
    expect(arms.find((a) => a.name !== route[0])).toMatchObject({ routed: 0, rewarded: 0 });
    await expect(r.reward('never-routed', 1)).rejects.toThrow(NotFoundError);
  });

  it('keeps nothing per prediction when the strategy does not learn', async () => {
    // This test's keys only (other test files share the server).
    const keys = async () => (await redis.keys()).length;
    const before = await keys();
    const r = router({ kind: 'weighted', weights: { small: 1, large: 1 } });
    const { puid } = await r.predict({ puid: undefined, body: {} });
    expect(await r.reward(puid, 1)).toBe('ignored');
    expect(await keys()).toBe(before);
  });

  it('learns from rewards stored in Redis: Thompson sampling moves to the better child', async () => {
    const r = router({ kind: 'thompson' }, 3);
    const payout = seededRandom(5);
    for (let i = 0; i < 300; i += 1) {
      const { puid, route } = await r.predict({ puid: `t-${i}`, body: {} });
      const p = route[0] === 'large' ? 0.9 : 0.1;
      await r.reward(puid, payout() < p ? 1 : 0);
    }
    const arms = (await r.arms()).children;
    expect(arms.find((a) => a.name === 'large')!.routed).toBeGreaterThan(200);
  });

  it('decides on the figures its last record brought back, reading them again after a quiet second', async () => {
    const real = createRouteStore(redis.client, {
      node: `node-${(nodes += 1)}`,
      puidTtlMs: 60_000,
    });
    let reads = 0;
    const store = { ...real, stats: (c: readonly string[]) => ((reads += 1), real.stats(c)) };
    let clock = 0;
    const uniform = seededRandom(7);
    const r = createRouter({
      strategy: { kind: 'thompson' },
      children,
      store,
      uniform,
      normal: normal(uniform),
      now: () => clock,
    });
    const first = await r.predict({ puid: 'q-1', body: {} });
    await r.reward(first.puid, 1);
    for (let i = 2; i <= 10; i += 1) await r.predict({ puid: `q-${i}`, body: {} });
    expect(reads).toBe(1);
    clock += 1_000;
    await r.predict({ puid: 'q-11', body: {} });
    expect(reads).toBe(2);
    // What the last record brought back is the arms' figures after it, rewards included.
    const recorded = await real.record('q-11', ['ignored'], children);
    expect([...recorded.arms.values()].reduce((n, a) => n + a.routed, 0)).toBe(11);
    expect([...recorded.arms.values()].reduce((n, a) => n + a.rewarded, 0)).toBe(1);
    expect(recorded.route).toEqual((await r.predict({ puid: 'q-11', body: {} })).route);
  });

  describe('as a function', () => {
    let server: Listening;
    beforeAll(async () => {
      server = await listen(
        buildServer(
          routerDefinition({
            router: router({ kind: 'epsilon-greedy', epsilon: 1 }),
            readiness: [],
          }),
          {
            telemetry: capturedTelemetry('router'),
            bodyLimitBytes: 4096,
            readinessTimeoutMs: 1000,
          },
        ),
      );
    });
    afterAll(() => server.close());

    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });

    it('answers the payload unchanged, with the route and the prediction id', async () => {
      const payload = { instances: [[1, 2, 3]] };
      const answer = await post('/predict', payload, { 'mlgraph-puid': 'req-42' });
      expect(answer.status).toBe(200);
      expect(await answer.json()).toEqual(payload);
      expect(answer.headers.get('mlgraph-puid')).toBe('req-42');
      expect(children).toContain(answer.headers.get('mlgraph-route'));
      const fresh = await post('/predict', payload);
      expect(fresh.headers.get('mlgraph-puid')).toMatch(/^[0-9a-f-]{36}$/);
    });

    it('refuses a malformed prediction id and an unknown one for rewards', async () => {
      const bad = await post('/predict', {}, { 'mlgraph-puid': 'no spaces' });
      expect(bad.status).toBe(400);
      expect(await bad.text()).toContain('mlgraph-puid');
      const unknown = await post('/reward', { puid: 'nobody', reward: 1 });
      expect(unknown.status).toBe(404);
      const outOfRange = await post('/reward', { puid: 'req-42', reward: 2 });
      expect(outOfRange.status).toBe(400);
      expect(await (await post('/reward', { puid: 'req-42', reward: 1 })).json()).toEqual({
        outcome: 'applied',
      });
    });

    it('answers a predict event with a routed event, the same route on redelivery', async () => {
      const send = (source: string) =>
        postEvent(
          server.url,
          eventTypes.graphPredict,
          { x: 1 },
          {
            'ce-id': 'event-7',
            'ce-source': source,
          },
        );
      const first = await send('/clients/a');
      expect(first.status).toBe(200);
      expect(first.headers.get('ce-type')).toBe(eventTypes.graphRouted);
      const puid = first.headers.get('ce-mlgraphpuid');
      expect(puid).toMatch(/^ce-[0-9a-f]{32}$/);
      expect(await first.json()).toEqual({ x: 1 });
      for (let i = 0; i < 10; i += 1) {
        const again = await send('/clients/a');
        expect(again.headers.get('ce-mlgraphpuid')).toBe(puid);
        expect(again.headers.get('ce-mlgraphroute')).toBe(first.headers.get('ce-mlgraphroute'));
      }
      // Event ids are unique per source only: another source's event-7 is another prediction.
      const other = await send('/clients/b');
      expect(other.headers.get('ce-mlgraphpuid')).not.toBe(puid);
      const reward = await postEvent(server.url, eventTypes.graphReward, {
        puid: 'forgotten',
        reward: 0,
      });
      expect(reward.status).toBe(202);
      // The contract's own example: a numeric prediction id.
      expect((await post('/reward', { puid: 1234, reward: 1 })).status).toBe(404);
    });
  });

  it.each([
    [{ MLGRAPH_CHILDREN: 'a,b' }, /MLGRAPH_NODE: required/],
    [{ K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a,A' }, /'A' must be a DNS-1123 label/],
    [{ K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a,a' }, /named twice/],
    [{ K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a', MLGRAPH_ROUTE: '{' }, /must be JSON/],
    [{ K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a', MLGRAPH_ROUTE: '{"kind":"magic"}' }, /MLGRAPH_ROUTE/],
    [
      {
        K_SERVICE: 'r',
        MLGRAPH_CHILDREN: 'a',
        MLGRAPH_ROUTE: '{"kind":"static","children":["b"]}',
      },
      /names b, not in MLGRAPH_CHILDREN/,
    ],
    [
      { K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a', MLGRAPH_ARM_COSTS: '{"b":{"perRequest":1}}' },
      /MLGRAPH_ARM_COSTS: names b, not in MLGRAPH_CHILDREN/,
    ],
    [
      { K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a', MLGRAPH_ARM_COSTS: '{"a":{"perRequest":-1}}' },
      /MLGRAPH_ARM_COSTS: a.perRequest/,
    ],
    [
      { K_SERVICE: 'r', MLGRAPH_CHILDREN: 'a', MLGRAPH_ARM_COSTS: '{"a":{"perLatencySecond":1}}' },
      /perLatencySecond needs the graph's executor/,
    ],
  ])('refuses the settings %o', (env, message) => {
    expect(() => loadRouterConfig(env)).toThrow(message);
  });

  it('takes arm costs from MLGRAPH_ARM_COSTS and shows each child its cost in /arms', async () => {
    const settings = loadRouterConfig({
      K_SERVICE: 'r',
      MLGRAPH_CHILDREN: 'small,large',
      MLGRAPH_ROUTE: '{"kind":"thompson"}',
      MLGRAPH_ARM_COSTS: '{"large":{"perRequest":0.25}}',
    });
    expect(settings.costs).toEqual({ large: { perRequest: 0.25 } });
    const uniform = seededRandom(5);
    const r = createRouter({
      strategy: settings.strategy,
      children: settings.children,
      store: createRouteStore(redis.client, { node: `node-${(nodes += 1)}`, puidTtlMs: 60_000 }),
      costs: settings.costs,
      uniform,
      normal: normal(uniform),
    });
    // A fresh prediction id is routed at once; its route is kept by the time `recorded` settles.
    const routed = await r.predict({ puid: 'fresh-1', body: {}, fresh: true });
    expect(routed.recorded).toBeDefined();
    await routed.recorded;
    expect(await r.reward(routed.puid, 1)).toBe('applied');
    expect((await r.arms()).children).toEqual([
      expect.objectContaining({ name: 'small', cost: 0 }),
      expect.objectContaining({ name: 'large', cost: 0.25 }),
    ]);
  });
});
