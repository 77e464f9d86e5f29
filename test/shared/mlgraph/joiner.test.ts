/**
 * The joiner over a real Redis and real HTTP: a join completes exactly on the input that meets
 * the tightest bound, whatever the arrival order and redeliveries (property); overdue joins are
 * handed out once as explicit partials, to a real sink; the function answers the join contract.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SinkRefusedError, createEventSink, eventTypes } from '../../../shared/events/index.js';
import { buildServer, createHttpClient, sinkPost } from '../../../shared/http/index.js';
import {
  createJoinStore,
  createJoiner,
  joinerDefinition,
  loadJoinerConfig,
  sweepEvery,
} from '../../../shared/mlgraph/index.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

describe('joiner', () => {
  let redis: TestRedis;
  let nodes = 0;
  beforeAll(async () => {
    redis = await testRedis();
  });
  afterAll(() => redis.close());

  const store = (deadlineMs = 1_000) =>
    createJoinStore(redis.client, {
      node: `join-${(nodes += 1)}`,
      deadlineMs,
      keepMs: 60_000,
      leaseMs: 500,
    });

  it('completes when as many inputs arrived as the tightest bound allows, in any order (property)', async () => {
    const arrivals = fc.integer({ min: 1, max: 6 }).chain((n) =>
      fc.tuple(
        fc.shuffledSubarray(['a', 'b', 'c', 'd', 'e', 'f'].slice(0, n), {
          minLength: n,
          maxLength: n,
        }),
        fc.array(fc.nat(3), { minLength: n, maxLength: n }),
        fc.nat(n - 1),
        fc.array(fc.nat(n - 1), { maxLength: 4 }),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arrivals, async ([order, slack, exact, resends]) => {
        const s = store();
        const n = order.length;
        const outcomes: string[] = [];
        for (let k = 0; k < n; k += 1) {
          // Each input's path counts the other inputs it still allows for, arrived or not; one
          // path is exact, the others may count branches that were not taken.
          const pending = n - 1 + (k === exact ? 0 : slack[k]!);
          const add = (source: string, p: number) =>
            s.add({ puid: 'tx', source, pending: p, payload: { from: source }, nowMs: 0 });
          const outcome = await add(order[k]!, pending);
          outcomes.push(outcome.kind);
          if (outcome.kind === 'complete') {
            expect(Object.keys(outcome.joined.inputs)).toEqual([...order].sort());
            expect(outcome.joined.inputs[order[0]!]).toEqual({ from: order[0] });
          }
          // Redeliveries of inputs already taken change nothing while the join is open.
          for (const r of resends) {
            if (r < k) expect((await add(order[r]!, n - 1)).kind).toMatch(/waiting|late/);
          }
        }
        expect(outcomes).toEqual([...Array<string>(n - 1).fill('waiting'), 'complete']);
        const completer = order[n - 1]!;
        expect(
          (await s.add({ puid: 'tx', source: completer, pending: 0, payload: 1, nowMs: 0 })).kind,
        ).toBe('again');
        if (n > 1) {
          expect(
            await s.add({ puid: 'tx', source: order[0]!, pending: 0, payload: 1, nowMs: 0 }),
          ).toEqual({ kind: 'late', state: 'complete' });
        }
      }),
      { numRuns: 80 },
    );
  });

  it('completes as soon as a path says no branch is left, whichever input came first', async () => {
    // The contract's graph: the root forks to A and to router R, which may send to B and C;
    // R took only B. A's path allows 2 others, B's path 1 (A).
    for (const order of [
      ['A', 'B'],
      ['B', 'A'],
    ]) {
      const s = store();
      const pending: Record<string, number> = { A: 2, B: 1 };
      const outcomes = [];
      for (const source of order) {
        outcomes.push(
          (await s.add({ puid: 'fork', source, pending: pending[source]!, payload: 0, nowMs: 0 }))
            .kind,
        );
      }
      expect(outcomes).toEqual(['waiting', 'complete']);
    }
  });

  it('completes on a lowered bound (a route not taken after the inputs went), before or after them', async () => {
    // A went with pending 2 (B and C may come); then the router took only B.
    const after = store();
    await after.add({ puid: 't', source: 'A', pending: 2, payload: 'a', nowMs: 0 });
    await after.add({ puid: 't', source: 'B', pending: 2, payload: 'b', nowMs: 0 });
    const done = await after.tighten({ puid: 't', inputs: 2 });
    expect(done).toMatchObject({ kind: 'complete', joined: { inputs: { A: 'a', B: 'b' } } });
    expect((await after.tighten({ puid: 't', inputs: 2 })).kind).toBe('again');
    // The bound overtakes an input still on its way: kept, and the input completes the join.
    const before = store();
    expect((await before.tighten({ puid: 'u', inputs: 1 })).kind).toBe('waiting');
    const first = await before.add({ puid: 'u', source: 'A', pending: 2, payload: 'a', nowMs: 0 });
    expect(first).toMatchObject({ kind: 'complete', joined: { inputs: { A: 'a' } } });
    // A bound never loosens.
    const tight = store();
    await tight.tighten({ puid: 'v', inputs: 1 });
    await tight.tighten({ puid: 'v', inputs: 3 });
    expect(
      (await tight.add({ puid: 'v', source: 'A', pending: 2, payload: 0, nowMs: 0 })).kind,
    ).toBe('complete');
  });

  it('completes once when the inputs race in from many replicas', async () => {
    const s = store();
    const sources = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    const outcomes = await Promise.all(
      sources.map((source) => s.add({ puid: 'race', source, pending: 7, payload: 0, nowMs: 0 })),
    );
    expect(outcomes.filter((o) => o.kind === 'complete')).toHaveLength(1);
  });

  it('hands an overdue join out once, frozen when claimed, to whoever holds the claim', async () => {
    const s = store(1_000);
    await s.add({ puid: 'slow', source: 'a', pending: 2, payload: 'A', nowMs: 0 });
    await s.add({ puid: 'slow', source: 'b', pending: 2, payload: 'B', nowMs: 10 });
    expect((await s.due(999, 10)).claimed).toEqual([]);
    const [first, second] = await Promise.all([s.due(1_000, 10), s.due(1_000, 10)]);
    const claimed = [...first.claimed, ...second.claimed];
    expect(claimed).toHaveLength(1);
    expect(claimed[0]).toMatchObject({
      puid: 'slow',
      state: 'closing',
      inputs: { a: 'A', b: 'B' },
      missing: 1,
    });
    // Claimed means frozen: what arrives now is late, not lost inside a partial already read.
    expect(
      await s.add({ puid: 'slow', source: 'c', pending: 0, payload: 'C', nowMs: 1_001 }),
    ).toEqual({ kind: 'late', state: 'closing' });
    // Not finished within its lease (its replica died): due again, and the claim moves.
    expect((await s.due(1_499, 10)).claimed).toEqual([]);
    const again = await s.due(1_500, 10);
    expect(again.claimed).toHaveLength(1);
    expect(await s.finish('slow', claimed[0]!.claim)).toBe(false);
    expect(await s.finish('slow', again.claimed[0]!.claim)).toBe(true);
    expect((await s.due(5_000, 10)).claimed).toEqual([]);
    expect(await s.get('slow')).toMatchObject({ state: 'partial', missing: 1 });
  });

  it('keeps sending the other partials when the sink refuses one for good', async () => {
    const s = store(100);
    for (const puid of ['a1', 'b2', 'c3']) {
      await s.add({ puid, source: 'x', pending: 1, payload: puid, nowMs: 0 });
    }
    const sent: string[] = [];
    const refused: string[] = [];
    const joiner = createJoiner({
      node: 'n',
      store: s,
      now: () => 1_000,
      sink: (event) => {
        if (event.subject === 'a1') return Promise.reject(new SinkRefusedError(413));
        sent.push(event.subject ?? '');
        return Promise.resolve();
      },
      onRefused: (joined) => refused.push(joined.puid),
    });
    expect(await joiner.sweep()).toBe(2);
    expect(sent.sort()).toEqual(['b2', 'c3']);
    expect(refused).toEqual(['a1']);
    expect(await joiner.sweep()).toBe(0);
    expect((await s.get('a1'))?.state).toBe('partial');
  });

  it('runs one sweep at a time on a replica, however slow the sink', async () => {
    let sweeps = 0;
    let release: () => void = () => {};
    const slow = {
      sweep: () => {
        sweeps += 1;
        return new Promise<number>((resolve) => (release = () => resolve(0)));
      },
    };
    const clock = { now: 0 };
    const sweep = sweepEvery(
      slow,
      10,
      () => clock.now,
      () => {},
    );
    const first = sweep();
    for (let i = 0; i < 5; i += 1) {
      clock.now += 100;
      await sweep();
    }
    expect(sweeps).toBe(1);
    release();
    await first;
    clock.now += 100;
    void sweep();
    expect(sweeps).toBe(2);
    release();
  });

  describe('as a function', () => {
    let server: Listening;
    let sink: Listening;
    const received: Array<{ headers: IncomingHttpHeaders; body: unknown }> = [];
    const clock = { now: 0 };

    beforeAll(async () => {
      sink = await listen(
        createServer((req, res) => {
          const chunks: Buffer[] = [];
          req.on('data', (c: Buffer) => chunks.push(c));
          req.on('end', () => {
            received.push({
              headers: req.headers,
              body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown,
            });
            res.writeHead(202).end();
          });
        }),
      );
      const joiner = createJoiner({
        node: 'ensemble',
        store: createJoinStore(redis.client, {
          node: 'ensemble',
          deadlineMs: 1_000,
          keepMs: 60_000,
          leaseMs: 1_000,
        }),
        now: () => clock.now,
        sink: createEventSink({
          url: sink.url,
          source: '/test/joiner',
          attempts: 2,
          post: sinkPost(createHttpClient().send),
        }),
      });
      server = await listen(
        buildServer(joinerDefinition({ node: 'ensemble', joiner, maxInputs: 4, readiness: [] }), {
          telemetry: capturedTelemetry('joiner'),
          bodyLimitBytes: 4096,
          readinessTimeoutMs: 1000,
        }),
      );
    });
    afterAll(async () => {
      await server.close();
      await sink.close();
    });

    const input = (puid: string, source: string, pending: number, body: unknown) =>
      fetch(`${server.url}/predict`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'mlgraph-puid': puid,
          'mlgraph-source': source,
          'mlgraph-pending-requests': String(pending),
        },
        body: JSON.stringify(body),
      });

    it('answers the completing input with the join, the others with an empty 202', async () => {
      const first = await input('p1', 'small', 1, { y: 1 });
      expect(first.status).toBe(202);
      expect(await first.text()).toBe('');
      const last = await input('p1', 'large', 0, { y: 2 });
      expect(last.status).toBe(200);
      expect(await last.json()).toEqual({
        puid: 'p1',
        partial: false,
        missing: 0,
        inputs: { large: { y: 2 }, small: { y: 1 } },
      });
    });

    it('takes a lowered bound over HTTP, answered like an input', async () => {
      expect((await input('p3', 'small', 2, { y: 1 })).status).toBe(202);
      const bound = (inputs: unknown) =>
        fetch(`${server.url}/joins/p3/bound`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ inputs }),
        });
      expect((await bound(0)).status).toBe(400);
      const done = await bound(1);
      expect(done.status).toBe(200);
      expect(await done.json()).toMatchObject({ partial: false, inputs: { small: { y: 1 } } });
    });

    it('names the metadata a request gets wrong', async () => {
      const noSource = await fetch(`${server.url}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'mlgraph-puid': 'p2' },
        body: '{}',
      });
      expect(noSource.status).toBe(400);
      expect(await noSource.text()).toContain('mlgraph-source');
      const empty = await fetch(`${server.url}/predict`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'mlgraph-puid': 'p2',
          'mlgraph-source': 'a',
          'mlgraph-pending-requests': '',
        },
        body: '{}',
      });
      expect(empty.status).toBe(400);
      expect(await empty.text()).toContain('mlgraph-pending-requests');
      const bodyless = await fetch(`${server.url}/predict`, {
        method: 'POST',
        headers: { 'mlgraph-puid': 'p2', 'mlgraph-source': 'a', 'mlgraph-pending-requests': '0' },
      });
      expect(bodyless.status).toBe(400);
      expect(await bodyless.text()).toContain('needs a JSON body');
      const tooMany = await input('p2', 'a', 9, {});
      expect(tooMany.status).toBe(400);
      expect(await tooMany.text()).toContain('MLGRAPH_MAX_INPUTS');
    });

    it('answers partial events with a joined event once complete', async () => {
      const event = (source: string, pending: number) =>
        postEvent(
          server.url,
          eventTypes.graphPartial,
          { from: source },
          {
            'ce-mlgraphpuid': 'e1',
            'ce-mlgraphsource': source,
            'ce-mlgraphpending': String(pending),
          },
        );
      expect((await event('a', 1)).status).toBe(202);
      const done = await event('b', 0);
      expect(done.headers.get('ce-type')).toBe(eventTypes.graphJoined);
      expect(done.headers.get('ce-mlgraphpuid')).toBe('e1');
      // The completing input resent: the same answer, as the same event.
      const again = await event('b', 0);
      expect(again.headers.get('ce-id')).toBe('ensemble:e1:joined');
      expect(done.headers.get('ce-id')).toBe('ensemble:e1:joined');
    });

    it('sends an overdue join to the sink on the tick, once, and keeps it for GET', async () => {
      await input('late-tx', 'small', 1, { y: 3 });
      clock.now += 1_000;
      expect((await postEvent(server.url, eventTypes.pingTick, {})).status).toBe(202);
      expect((await postEvent(server.url, eventTypes.pingTick, {})).status).toBe(202);
      expect(received).toHaveLength(1);
      expect(received[0]!.headers).toMatchObject({
        'ce-type': eventTypes.graphJoined,
        'ce-id': 'ensemble:late-tx:partial',
        'ce-mlgraphpuid': 'late-tx',
      });
      expect(received[0]!.body).toEqual({
        puid: 'late-tx',
        partial: true,
        missing: 1,
        inputs: { small: { y: 3 } },
      });
      const kept = await fetch(`${server.url}/joins/late-tx`);
      expect(await kept.json()).toMatchObject({ state: 'partial', partial: true });
      expect((await fetch(`${server.url}/joins/nothing`)).status).toBe(404);
    });
  });

  it('needs a node name', () => {
    expect(() => loadJoinerConfig({})).toThrow(/MLGRAPH_NODE: required/);
    expect(loadJoinerConfig({ K_SERVICE: 'ensemble' })).toMatchObject({
      node: 'ensemble',
      deadlineMs: 2_000,
      maxInputs: 16,
    });
  });
});
