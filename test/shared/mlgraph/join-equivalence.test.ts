/**
 * A join in the executor answers the same bytes as the joiner function for the same inputs: the
 * same ensemble graph run twice, once with a built-in join and once with a join of your own (the
 * joiner function over a real Redis), the members answering the same bytes in the same order,
 * some failing softly or answering after an outer join's window (property, over arrival orders
 * and missing inputs, for inner, any and outer joins).
 */
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer, createHttpClient } from '../../../shared/http/index.js';
import type { FunctionDefinition } from '../../../shared/http/index.js';
import { graphPlan } from '../../../shared/messages/graph-plan.js';
import {
  createBuiltinRouters,
  createExecutor,
  createJoinStore,
  createJoiner,
  createPathStore,
  graphDefinition,
  joinerDefinition,
} from '../../../shared/mlgraph/index.js';
import { normal } from '../../../shared/random/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

/** How a member answers in one run: in its turn, a Soft failure, or after the window. */
type Behaviour = 'answer' | 'fail' | 'late';

interface Member extends Listening {
  /** This run's: released in turn; `answered` settles once the answer has left (or was cut). */
  turn: { go: () => void; answered: Promise<void>; behaviour: Behaviour; body: string };
  arrived: Promise<void>;
  /** Sets this run's behaviour and bytes. */
  reset(behaviour: Behaviour, body: string): void;
}

const sources = ['a', 'b', 'c', 'd'];
const windowMs = 600;

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** A model server that answers this run's bytes when released. */
async function member(): Promise<Member> {
  const state = {} as { release: Promise<void>; answered: () => void; arrived: () => void };
  const self = {} as Member;
  const server = createServer((req, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      const { behaviour, body } = self.turn;
      const { answered } = state;
      state.arrived();
      // Closed when the answer has left, or earlier when the graph, having answered without
      // this member (an outer join's window), cut the call.
      res.on('close', answered);
      void state.release.then(() => {
        if (res.destroyed) return;
        if (behaviour === 'fail') {
          res.writeHead(503, { 'content-type': 'application/json' });
          res.end('{"error":"down"}');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(body);
      });
    });
  });
  const listening = await listen(server);
  return Object.assign(self, listening, {
    reset(behaviour: Behaviour, body: string) {
      const release = gate();
      const answered = gate();
      const arrived = gate();
      Object.assign(state, {
        release: release.promise,
        answered: answered.open,
        arrived: arrived.open,
      });
      self.turn = { go: release.open, answered: answered.promise, behaviour, body };
      self.arrived = arrived.promise;
    },
  });
}

describe('joins in the executor and in the joiner function', () => {
  let redis: TestRedis;
  const client = createHttpClient();
  const servers: Listening[] = [];
  let members: Member[];
  let counter = 0;

  const serve = async (definition: FunctionDefinition) => {
    const server = await listen(
      buildServer(definition, {
        telemetry: capturedTelemetry(definition.name),
        bodyLimitBytes: 1 << 20,
        readinessTimeoutMs: 1000,
      }),
    );
    servers.push(server);
    return server;
  };

  beforeAll(async () => {
    redis = await testRedis();
    members = await Promise.all(sources.map(() => member()));
    servers.push(...members);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await redis.close();
    client.close();
  });

  /** A static fork to `k` members, Soft edges, into one join (built in, or the joiner's). */
  async function ensemble(k: number, type: 'inner' | 'any' | 'outer', remote: boolean) {
    const id = (counter += 1);
    let url: string | undefined;
    if (remote) {
      const node = `eq-join-${id}`;
      const store = createJoinStore(redis.client, {
        node,
        deadlineMs: 30_000,
        keepMs: 60_000,
        leaseMs: 1_000,
      });
      const joiner = createJoiner({ node, store, now: () => Date.now(), sink: undefined });
      url = (await serve(joinerDefinition({ node, joiner, maxInputs: 16, readiness: [] }))).url;
    }
    const names = sources.slice(0, k);
    const plan = graphPlan.parse({
      graph: `ns/eq-${id}`,
      root: 'fork',
      nodes: [
        {
          name: 'fork',
          kind: 'router',
          router: { node: `ns.eq-${id}-fork`, strategy: { kind: 'static' } },
          children: names.map((node) => ({ node, dependency: 'Soft' })),
        },
        ...names.map((name, i) => ({
          name,
          kind: 'model',
          url: members[i]!.url,
          model: { name },
          children: [{ node: 'j' }],
        })),
        {
          name: 'j',
          kind: 'join',
          ...(url === undefined ? {} : { url }),
          join: { type, ...(type === 'outer' ? { windowMs } : {}) },
        },
      ],
    });
    const executor = createExecutor({
      plan,
      outliers: new Map(),
      routers: createBuiltinRouters(plan, {
        redis: redis.client,
        puidTtlMs: 60_000,
        uniform: Math.random,
        normal: normal(Math.random),
      }),
      send: client.send,
      paths: createPathStore(redis.client, { graph: plan.graph, ttlMs: 60_000 }),
      now: () => performance.now(),
    });
    return (await serve(graphDefinition({ name: `eq-${id}`, executor, readiness: [] }))).url;
  }

  /**
   * One request: the members released one at a time in `order`, each once the previous one's
   * answer has left ('late' ones only after the graph answered; for `any`, the members after
   * the first that answers too).
   */
  async function run(
    url: string,
    type: 'inner' | 'any' | 'outer',
    runs: Array<{ behaviour: Behaviour; body: string }>,
    order: readonly number[],
  ) {
    runs.forEach((r, i) => members[i]!.reset(r.behaviour, r.body));
    const answer = fetch(`${url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'mlgraph-puid': 'p-eq' },
      body: '{"inputs":[]}',
    });
    await Promise.all(runs.map((_, i) => members[i]!.arrived));
    const held: number[] = [];
    let fired = false;
    for (const i of order) {
      const { behaviour } = runs[i]!;
      if (behaviour === 'late' || fired) {
        held.push(i);
        continue;
      }
      members[i]!.turn.go();
      await members[i]!.turn.answered;
      if (type === 'any' && behaviour === 'answer') fired = true;
    }
    const response = await answer;
    const result = {
      status: response.status,
      body: Buffer.from(await response.arrayBuffer()).toString('utf8'),
      partial: response.headers.get('mlgraph-partial'),
      skipped: response.headers.get('mlgraph-skipped'),
    };
    for (const i of held) members[i]!.turn.go();
    await Promise.all(held.map((i) => members[i]!.turn.answered));
    return result;
  }

  const cases = fc
    .record({
      type: fc.constantFrom('inner' as const, 'any' as const, 'outer' as const),
      k: fc.integer({ min: 1, max: sources.length }),
    })
    .chain(({ type, k }) =>
      fc.record({
        type: fc.constant(type),
        runs: fc.array(
          fc.record({
            behaviour: fc.constantFrom<Behaviour>(
              ...((type === 'outer'
                ? ['answer', 'fail', 'late']
                : ['answer', 'fail']) as Behaviour[]),
            ),
            // An answer's bytes as a member sends them: any JSON, compact or indented.
            body: fc
              .tuple(fc.jsonValue(), fc.constantFrom(0, 1, 2))
              .map(([value, indent]) => JSON.stringify(value, null, indent)),
          }),
          { minLength: k, maxLength: k },
        ),
        order: fc.shuffledSubarray(
          Array.from({ length: k }, (_, i) => i),
          { minLength: k, maxLength: k },
        ),
      }),
    )
    // Some member answers in its turn (else there is nothing to join).
    .filter((c) => c.runs.some((r) => r.behaviour === 'answer'));

  it('answer the same bytes for the same inputs, whatever their order and whichever are missing (property)', async () => {
    await fc.assert(
      fc.asyncProperty(cases, async ({ type, runs, order }) => {
        const here = await run(await ensemble(runs.length, type, false), type, runs, order);
        const there = await run(await ensemble(runs.length, type, true), type, runs, order);
        expect(here.status).toBe(200);
        expect(there.status).toBe(200);
        expect(here.partial).toBe(there.partial);
        expect(here.skipped).toBe(there.skipped);
        // The joiner's GET, which hands out an outer join at its window, adds the join's state.
        const expected =
          here.partial === 'true' ? `${here.body.slice(0, -1)},"state":"open"}` : here.body;
        expect(there.body).toBe(expected);
        // What the answer holds: every member that answered in its turn (for `any`: the first).
        const joined = JSON.parse(here.body) as { inputs: Record<string, unknown> };
        const answered = order.filter((i) => runs[i]!.behaviour === 'answer');
        const expectedSources = (type === 'any' ? answered.slice(0, 1) : answered)
          .map((i) => sources[i]!)
          .sort();
        expect(Object.keys(joined.inputs).sort()).toEqual(expectedSources);
        for (const source of expectedSources) {
          expect(joined.inputs[source]).toEqual(
            JSON.parse(runs[sources.indexOf(source)]!.body) as unknown,
          );
        }
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
