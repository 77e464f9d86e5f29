/**
 * The graph executor end to end over real HTTP and a real Redis: the router and joiner functions
 * as deployed (their own servers and stores), small OIP model servers, and the executor's own
 * function. Each test declares a graph and sends it requests as a client would.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDevBroker, loadEventing } from '../../../local/broker/index.js';
import { eventTypes } from '../../../shared/events/index.js';
import { buildServer } from '../../../shared/http/index.js';
import type { FunctionDefinition } from '../../../shared/http/index.js';
import { graphPlan } from '../../../shared/messages/graph-plan.js';
import {
  createBuiltinOutliers,
  createBuiltinRouters,
  createExecutor,
  createGraphClient,
  createJoinStore,
  createJoiner,
  createPathStore,
  createRouteStore,
  createRouter,
  graphDefinition,
  joinerDefinition,
  routerDefinition,
} from '../../../shared/mlgraph/index.js';
import type { Strategy } from '../../../shared/crds/route-strategy.js';
import { normal } from '../../../shared/random/index.js';
import { loadMnist } from '../../../shared/training/data.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { signal } from '../../support/signal.js';
import type { Signal } from '../../support/signal.js';

interface ModelBehaviour {
  /** Answer only once this settles (a model still computing). */
  hold?: Promise<unknown>;
  /** Answer this status (with an OIP error) this many times, then answer normally. */
  fail?: { status: number; times: number };
}

interface FakeModel extends Listening {
  name: string;
  calls: Array<{ headers: IncomingHttpHeaders; body: Buffer }>;
  /** Changed on every call. */
  called: Signal;
  behaviour: ModelBehaviour;
}

/**
 * An OIP server for one model: its answer's one output `y` is the sum of the input's data plus
 * `offset`. A binary request is answered in binary, its input bytes echoed as the output.
 */
async function fakeModel(name: string, offset: number): Promise<FakeModel> {
  const calls: FakeModel['calls'] = [];
  const called = signal();
  const behaviour: ModelBehaviour = {};
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        calls.push({ headers: req.headers, body });
        called.changed();
        await behaviour.hold;
        if (req.url !== `/v2/models/${name}/infer`) {
          res.writeHead(404, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: `no model at ${req.url}` }));
          return;
        }
        if (behaviour.fail !== undefined && behaviour.fail.times > 0) {
          behaviour.fail.times -= 1;
          res.writeHead(behaviour.fail.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: `input x: ${name} refuses it` }));
          return;
        }
        const headerLength = req.headers['inference-header-content-length'];
        if (typeof headerLength === 'string') {
          const tensor = body.subarray(Number(headerLength));
          const header = Buffer.from(
            JSON.stringify({
              model_name: name,
              outputs: [
                {
                  name: 'y',
                  datatype: 'FP32',
                  shape: [1, tensor.length / 4],
                  parameters: { binary_data_size: tensor.length },
                },
              ],
            }),
          );
          res.writeHead(200, {
            'content-type': 'application/octet-stream',
            'inference-header-content-length': String(header.length),
          });
          res.end(Buffer.concat([header, tensor]));
          return;
        }
        const request = JSON.parse(body.toString('utf8')) as { inputs: Array<{ data: number[] }> };
        const sum = request.inputs[0]!.data.reduce((a, b) => a + b, 0);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            model_name: name,
            outputs: [{ name: 'y', datatype: 'FP32', shape: [1], data: [sum + offset] }],
          }),
        );
      })();
    });
  });
  return Object.assign(await listen(server), { name, calls, called, behaviour });
}

const modelRoot = fileURLToPath(new URL('../../../models', import.meta.url));
const request = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2], data: [1, 2] }] };

describe('graph executor', () => {
  let redis: TestRedis;
  const client = createGraphClient();
  const servers: Listening[] = [];
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
  const routerNode = (children: string[], strategy: Strategy) => {
    const node = `router-${(counter += 1)}`;
    const store = createRouteStore(redis.client, { node, puidTtlMs: 60_000 });
    const router = createRouter({
      strategy,
      children,
      store,
      uniform: Math.random,
      normal: normal(Math.random),
    });
    return serve(routerDefinition({ router, readiness: [] }));
  };
  const joinNode = (deadlineMs = 30_000) => {
    const node = `join-${(counter += 1)}`;
    const store = createJoinStore(redis.client, {
      node,
      deadlineMs,
      keepMs: 60_000,
      leaseMs: 1_000,
    });
    const joiner = createJoiner({ node, store, now: () => Date.now(), sink: undefined });
    return serve(joinerDefinition({ node, joiner, maxInputs: 16, readiness: [] }));
  };
  const graph = async (plan: unknown) => {
    const parsed = graphPlan.parse(plan);
    const executor = createExecutor({
      plan: parsed,
      outliers: await createBuiltinOutliers(parsed, { root: modelRoot, cacheDir: modelRoot }),
      routers: createBuiltinRouters(parsed, {
        redis: redis.client,
        puidTtlMs: 60_000,
        uniform: Math.random,
        normal: normal(Math.random),
      }),
      send: client.send,
      paths: createPathStore(redis.client, {
        graph: `${parsed.graph}-${(counter += 1)}`,
        ttlMs: 60_000,
      }),
      now: () => performance.now(),
    });
    return serve(graphDefinition({ name: parsed.graph.split('/')[1]!, executor, readiness: [] }));
  };
  const predict = (url: string, body: unknown = request, headers: Record<string, string> = {}) =>
    fetch(`${url}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  let small: FakeModel;
  let large: FakeModel;
  let third: FakeModel;
  beforeAll(async () => {
    redis = await testRedis();
    small = await fakeModel('small', 10);
    large = await fakeModel('large', 100);
    third = await fakeModel('third', 1000);
    servers.push(small, large, third);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await redis.close();
    client.close();
  });

  const model = (name: string, server: FakeModel, children: unknown[] = []) => ({
    name,
    kind: 'model',
    url: server.url,
    model: { name: server.name },
    children,
  });

  /** A router of its own (`fork`, static) to both models, their answers joined (`both`). */
  const ensemble = async (name: string, join: object, largeEdge: object = {}): Promise<string> => {
    const fork = await routerNode(['small', 'large'], { kind: 'static' });
    const joiner = await joinNode();
    const plan = {
      graph: `ns/${name}`,
      root: 'fork',
      nodes: [
        {
          name: 'fork',
          kind: 'router',
          url: fork.url,
          children: [{ node: 'small' }, { node: 'large', ...largeEdge }],
        },
        model('small', small, [{ node: 'both' }]),
        model('large', large, [{ node: 'both' }]),
        { name: 'both', kind: 'join', url: joiner.url, join },
      ],
    };
    return (await graph(plan)).url;
  };

  it('runs an ensemble: both models at once, their answers joined', async () => {
    // Each model holds its answer until both have the request: called one after the other,
    // the first would never answer (and the test would time out).
    const calledBoth = Promise.all(
      [small, large].map((m) => {
        const before = m.calls.length;
        return m.called.when(() => m.calls.length > before);
      }),
    );
    small.behaviour.hold = calledBoth;
    large.behaviour.hold = calledBoth;
    const url = await ensemble('ensemble', { type: 'inner' });
    const answer = await predict(url);
    small.behaviour.hold = undefined;
    large.behaviour.hold = undefined;
    expect(answer.status).toBe(200);
    expect(answer.headers.get('mlgraph-nodes')!.split(',').sort()).toEqual([
      'both',
      'fork',
      'large',
      'small',
    ]);
    const body = (await answer.json()) as {
      partial: boolean;
      inputs: Record<string, { outputs: Array<{ data: number[] }> }>;
    };
    expect(body.partial).toBe(false);
    expect(body.inputs['small']!.outputs[0]!.data).toEqual([13]);
    expect(body.inputs['large']!.outputs[0]!.data).toEqual([103]);
  });

  it('sends a reward to the router on the path, once however often it is resent', async () => {
    const bandit = await routerNode(['small', 'large'], { kind: 'thompson' });
    const url = (
      await graph({
        graph: 'ns/bandit',
        root: 'pick',
        nodes: [
          {
            name: 'pick',
            kind: 'router',
            url: bandit.url,
            children: [{ node: 'small' }, { node: 'large' }],
          },
          model('small', small),
          model('large', large),
        ],
      })
    ).url;
    const answer = await predict(url, request, { 'mlgraph-puid': 'p-1' });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('mlgraph-puid')).toBe('p-1');
    const chosen = answer.headers.get('mlgraph-nodes')!.split(',')[1]!;
    const reward = () =>
      fetch(`${url}/reward`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ puid: 'p-1', reward: 1 }),
      });
    expect(await (await reward()).json()).toEqual({ puid: 'p-1', routers: { pick: 'applied' } });
    expect(await (await reward()).json()).toEqual({ puid: 'p-1', routers: { pick: 'duplicate' } });
    const arms = (await (await fetch(`${bandit.url}/arms`)).json()) as {
      children: Array<{ name: string; rewarded: number }>;
    };
    expect(arms.children.find((c) => c.name === chosen)!.rewarded).toBe(1);
    expect(arms.children.reduce((n, c) => n + c.rewarded, 0)).toBe(1);
    const unknown = await fetch(`${url}/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ puid: 'never', reward: 1 }),
    });
    expect(unknown.status).toBe(404);
  });

  it('runs a built-in router itself, on the state its Service shows; a reward counts once', async () => {
    const key = `ns.builtin-${(counter += 1)}`;
    // The router node's own Service, as the controller deploys it (same Redis name).
    const service = await serve(
      routerDefinition({
        router: createRouter({
          strategy: { kind: 'thompson' },
          children: ['small', 'large'],
          store: createRouteStore(redis.client, { node: key, puidTtlMs: 60_000 }),
          uniform: Math.random,
          normal: normal(Math.random),
        }),
        readiness: [],
      }),
    );
    const url = (
      await graph({
        graph: 'ns/builtin',
        root: 'pick',
        nodes: [
          {
            name: 'pick',
            kind: 'router',
            router: { node: key, strategy: { kind: 'thompson' } },
            children: [{ node: 'small' }, { node: 'large' }],
          },
          model('small', small),
          model('large', large),
        ],
      })
    ).url;
    for (let i = 0; i < 3; i += 1)
      expect((await predict(url, request, { 'mlgraph-puid': `b-${i}` })).status).toBe(200);
    const arms = async () =>
      (
        (await (await fetch(`${service.url}/arms`)).json()) as {
          children: Array<{ routed: number; rewarded: number }>;
        }
      ).children;
    expect((await arms()).reduce((n, c) => n + c.routed, 0)).toBe(3);
    // By HTTP twice, then as an event delivered twice: applied once.
    const body = JSON.stringify({ puid: 'b-0', reward: 1 });
    const post = () =>
      fetch(`${url}/reward`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
    expect(await (await post()).json()).toEqual({ puid: 'b-0', routers: { pick: 'applied' } });
    expect(await (await post()).json()).toEqual({ puid: 'b-0', routers: { pick: 'duplicate' } });
    for (let i = 0; i < 2; i += 1) {
      const event = await postEvent(
        url,
        eventTypes.graphReward,
        { puid: 'b-1', reward: 1 },
        { 'ce-id': 'r-1' },
      );
      expect(event.status).toBe(202);
    }
    expect((await arms()).reduce((n, c) => n + c.rewarded, 0)).toBe(2);
  });

  it('rewards every router on a nested path, and none off it', async () => {
    const outer = await routerNode(['inner', 'third'], { kind: 'static', children: ['inner'] });
    const inner = await routerNode(['small', 'large'], { kind: 'thompson' });
    const url = (
      await graph({
        graph: 'ns/nested',
        root: 'outer',
        nodes: [
          {
            name: 'outer',
            kind: 'router',
            url: outer.url,
            children: [{ node: 'inner' }, { node: 'third' }],
          },
          {
            name: 'inner',
            kind: 'router',
            url: inner.url,
            children: [{ node: 'small' }, { node: 'large' }],
          },
          model('small', small),
          model('large', large),
          model('third', third),
        ],
      })
    ).url;
    expect((await predict(url, request, { 'mlgraph-puid': 'n-1' })).status).toBe(200);
    const rewarded = await fetch(`${url}/reward`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ puid: 'n-1', reward: 0.5 }),
    });
    // The static router keeps nothing per prediction; the bandit applies it.
    expect(await rewarded.json()).toEqual({
      puid: 'n-1',
      routers: { inner: 'applied', outer: 'ignored' },
    });
  });

  it('completes a join as soon as a route not taken rules out its last input', async () => {
    // root -> a and s; s chooses b (of b, c) only after a's input went; j joins a, b, c.
    const root = await routerNode(['a', 's'], { kind: 'static' });
    const s = await routerNode(['b', 'c'], { kind: 'static', children: ['b'] });
    // s answers only once a's input is at the join, so that b's input completes the join only
    // because s ruled c out. The join's deadline (30 s) is past the test's timeout.
    const join = await joinNode(30_000);
    let joined!: () => void;
    const aJoined = new Promise<void>((resolve) => (joined = resolve));
    const joinRelay = await relay(join.url, { relayed: () => joined() });
    const slowRouter = await relay(s.url, { hold: aJoined });
    const url = (
      await graph({
        graph: 'ns/bound',
        root: 'root',
        nodes: [
          { name: 'root', kind: 'router', url: root.url, children: [{ node: 'a' }, { node: 's' }] },
          model('a', small, [{ node: 'j' }]),
          {
            name: 's',
            kind: 'router',
            url: slowRouter.url,
            children: [{ node: 'b' }, { node: 'c' }],
          },
          model('b', large, [{ node: 'j' }]),
          model('c', third, [{ node: 'j' }]),
          { name: 'j', kind: 'join', url: joinRelay.url },
        ],
      })
    ).url;
    const answer = await predict(url);
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as { partial: boolean; inputs: object };
    expect(Object.keys(body.inputs).sort()).toEqual(['a', 'b']);
    // Complete, not handed out at the join's deadline (that one is partial).
    expect(body.partial).toBe(false);
  });

  it('answers a Hard step failure with that step status and message, never a 200', async () => {
    const url = (await graph({ graph: 'ns/hard', root: 'small', nodes: [model('small', small)] }))
      .url;
    small.behaviour.fail = { status: 422, times: 1 };
    const answer = await predict(url);
    expect(answer.status).toBe(422);
    expect(await answer.json()).toEqual({
      error: { status: 422, reason: 'StepError', message: 'node small: input x: small refuses it' },
    });
    // The OIP route answers errors as OIP does.
    small.behaviour.fail = { status: 400, times: 1 };
    const oip = await fetch(`${url}/v2/models/hard/infer`, {
      method: 'POST',
      body: JSON.stringify(request),
    });
    expect(oip.status).toBe(400);
    expect(await oip.json()).toEqual({ error: 'node small: input x: small refuses it' });
    const gone = (
      await graph({
        graph: 'ns/gone',
        root: 'm',
        nodes: [{ name: 'm', kind: 'model', url: 'http://127.0.0.1:9', model: { name: 'm' } }],
      })
    ).url;
    const unreachable = await predict(gone);
    expect(unreachable.status).toBe(502);
    expect(((await unreachable.json()) as { error: { message: string } }).error.message).toMatch(
      /^node m: no answer/,
    );
  });

  it('skips a Soft step and says so; the join completes with what came', async () => {
    const url = await ensemble('soft', {}, { dependency: 'Soft' });
    large.behaviour.fail = { status: 503, times: 1 };
    const answer = await predict(url);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('mlgraph-skipped')).toBe('large');
    expect(Object.keys(((await answer.json()) as { inputs: object }).inputs)).toEqual(['small']);
  });

  it('retries a retryable failure when the edge allows, within its deadline', async () => {
    const fork = await routerNode(['small'], { kind: 'static' });
    const url = (
      await graph({
        graph: 'ns/retry',
        root: 'fork',
        nodes: [
          {
            name: 'fork',
            kind: 'router',
            url: fork.url,
            children: [{ node: 'small', retries: 2 }],
          },
          model('small', small),
        ],
      })
    ).url;
    small.behaviour.fail = { status: 503, times: 2 };
    const answer = await predict(url);
    expect(answer.status).toBe(200);
    small.behaviour.fail = { status: 500, times: 1 };
    // A 500 is not retried.
    expect((await predict(url)).status).toBe(500);
    small.behaviour.fail = undefined;
  });

  it('never waits past the deadline: the edge timeout, the graph budget, the caller budget', async () => {
    const fork = await routerNode(['small'], { kind: 'static' });
    const plan = (timeoutMs: number, edge: object) => ({
      graph: 'ns/deadline',
      root: 'fork',
      timeoutMs,
      nodes: [
        { name: 'fork', kind: 'router', url: fork.url, children: [{ node: 'small', ...edge }] },
        model('small', small),
      ],
    });
    // The model never answers while the test runs: a 504 can only be a deadline's (the graph
    // and the edge otherwise allow 30 s, past the test's timeout).
    let answerNow!: () => void;
    small.behaviour.hold = new Promise<void>((resolve) => (answerNow = resolve));
    try {
      for (const [url, headers] of [
        [(await graph(plan(30_000, { timeoutMs: 150 }))).url, {}],
        [(await graph(plan(150, {}))).url, {}],
        [(await graph(plan(30_000, {}))).url, { 'mlgraph-timeout-ms': '150' }],
      ] as const) {
        const answer = await predict(url, request, headers);
        expect(answer.status).toBe(504);
      }
      // Each hop is told the time left.
      const told = Number(small.calls.at(-1)!.headers['mlgraph-timeout-ms']);
      expect(told).toBeGreaterThan(0);
      expect(told).toBeLessThanOrEqual(150);
    } finally {
      small.behaviour.hold = undefined;
      answerNow();
    }
  });

  it('passes traceparent to every hop, in the caller trace', async () => {
    const url = (await graph({ graph: 'ns/trace', root: 'small', nodes: [model('small', small)] }))
      .url;
    const trace = '0af7651916cd43dd8448eb211c80319c';
    await predict(url, request, { traceparent: `00-${trace}-b7ad6b7169203331-01` });
    expect(small.calls.at(-1)!.headers['traceparent']).toMatch(
      new RegExp(`^00-${trace}-[0-9a-f]{16}-01$`),
    );
  });

  it('passes binary tensors through as bytes, both ways', async () => {
    const fork = await routerNode(['small'], {
      kind: 'condition',
      rules: [{ when: { path: 'parameters.tier', op: 'eq', value: 'gold' }, route: ['small'] }],
      otherwise: ['small'],
    });
    const url = (
      await graph({
        graph: 'ns/binary',
        root: 'fork',
        nodes: [
          { name: 'fork', kind: 'router', url: fork.url, children: [{ node: 'small' }] },
          model('small', small),
        ],
      })
    ).url;
    const values = new Float32Array([0.1, 0.2, 0.3, 0.4]);
    const header = Buffer.from(
      JSON.stringify({
        parameters: { tier: 'gold' },
        inputs: [
          { name: 'x', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } },
        ],
      }),
    );
    const answer = await fetch(`${url}/v2/models/binary/infer`, {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(header.length),
      },
      body: Buffer.concat([header, Buffer.from(values.buffer)]),
    });
    expect(answer.status).toBe(200);
    const length = Number(answer.headers.get('inference-header-content-length'));
    const bytes = Buffer.from(await answer.arrayBuffer());
    expect(JSON.parse(bytes.subarray(0, length).toString('utf8'))).toMatchObject({
      outputs: [{ name: 'y', parameters: { binary_data_size: 16 } }],
    });
    expect([
      ...new Float32Array(
        bytes.buffer.slice(bytes.byteOffset + length, bytes.byteOffset + length + 16),
      ),
    ]).toEqual([...values]);
  });

  it('joins binary answers in the executor without a joiner, binary for a binary caller', async () => {
    const url = (
      await graph({
        graph: 'ns/binary-join',
        root: 'fork',
        nodes: [
          {
            name: 'fork',
            kind: 'router',
            router: { node: `ns.binary-join-${(counter += 1)}`, strategy: { kind: 'static' } },
            children: [{ node: 'small' }, { node: 'large' }],
          },
          model('small', small, [{ node: 'both' }]),
          model('large', large, [{ node: 'both' }]),
          { name: 'both', kind: 'join', join: { type: 'inner' } },
        ],
      })
    ).url;
    const values = new Float32Array([1.5, -2, 3.25]);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'x', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } },
        ],
      }),
    );
    const answer = await fetch(`${url}/v2/models/binary-join/infer`, {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(header.length),
        'mlgraph-puid': 'bin-join',
      },
      body: Buffer.concat([header, Buffer.from(values.buffer)]),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('mlgraph-nodes')!.split(',').sort()).toEqual([
      'both',
      'fork',
      'large',
      'small',
    ]);
    const length = Number(answer.headers.get('inference-header-content-length'));
    const bytes = Buffer.from(await answer.arrayBuffer());
    // The join's shape, each member's OIP header in it; the tensors after, in the same order.
    const joined = JSON.parse(bytes.subarray(0, length).toString('utf8')) as {
      puid: string;
      partial: boolean;
      inputs: Record<string, { model_name: string; outputs: unknown[] }>;
    };
    expect(joined).toMatchObject({ puid: 'bin-join', partial: false, missing: 0 });
    expect(Object.keys(joined.inputs)).toEqual(['large', 'small']);
    expect(joined.inputs['large']!.model_name).toBe('large');
    expect(joined.inputs['small']!.outputs).toEqual([
      { name: 'y', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } },
    ]);
    const tensors = bytes.subarray(length);
    expect(tensors.length).toBe(24);
    const floats = new Float32Array(
      tensors.buffer.slice(tensors.byteOffset, tensors.byteOffset + 24),
    );
    expect([...floats]).toEqual([...values, ...values]);
    // The same graph, a JSON caller: a JSON answer.
    const json = await predict(url);
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await json.json()).toMatchObject({
      partial: false,
      inputs: { small: { outputs: [{ data: [13] }] }, large: { outputs: [{ data: [103] }] } },
    });
  });

  it('runs for a predict event, answered by a completed event', async () => {
    const url = (await graph({ graph: 'ns/events', root: 'small', nodes: [model('small', small)] }))
      .url;
    const answer = await postEvent(url, eventTypes.graphPredict, request, { 'ce-id': 'e-1' });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('ce-type')).toBe(eventTypes.graphCompleted);
    expect(answer.headers.get('ce-mlgraphpuid')).toMatch(/^ce-/);
    expect(await answer.json()).toMatchObject({ outputs: [{ data: [13] }] });
  });

  it('runs from the Broker: a predict event in, a completed event out to its Trigger', async () => {
    const url = (
      await graph({ graph: 'ns/brokered', root: 'small', nodes: [model('small', small)] })
    ).url;
    const heard: Array<{ headers: IncomingHttpHeaders; body: string }> = [];
    const listener = await listen(
      createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          heard.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
          res.writeHead(202).end();
        });
      }),
    );
    servers.push(listener);
    const trigger = (name: string, type: string, subscriber: string) => `---
apiVersion: eventing.knative.dev/v1
kind: Trigger
metadata: { name: ${name}, namespace: ns }
spec:
  broker: default
  filter: { attributes: { type: ${type} } }
  subscriber: { ref: { apiVersion: serving.knative.dev/v1, kind: Service, name: ${subscriber} } }
`;
    const broker = createDevBroker({
      manifests: loadEventing([
        'apiVersion: eventing.knative.dev/v1\nkind: Broker\nmetadata: { name: default, namespace: ns }\n' +
          trigger('predict', eventTypes.graphPredict, 'brokered') +
          trigger('completed', eventTypes.graphCompleted, 'listener'),
      ]),
      resolve: (ref) => ({ brokered: url, listener: listener.url })[ref.name],
    });
    const ingress = `${await broker.listen()}/ns/default`;
    try {
      // Sent twice (a redelivery): one prediction, the same completed event both times.
      for (let i = 0; i < 2; i += 1)
        expect(
          (await postEvent(ingress, eventTypes.graphPredict, request, { 'ce-id': 'b-1' })).status,
        ).toBe(202);
      await broker.idle();
    } finally {
      await broker.close();
    }
    expect(heard).toHaveLength(2);
    expect(heard.map((h) => h.headers['ce-type'])).toEqual([
      eventTypes.graphCompleted,
      eventTypes.graphCompleted,
    ]);
    expect(heard[0]!.headers['ce-id']).toBe(heard[1]!.headers['ce-id']);
    expect(JSON.parse(heard[0]!.body)).toMatchObject({ outputs: [{ data: [13] }] });
  });

  it('hands out an outer join when its window ends, marked partial', async () => {
    // large never answers while the test runs: only the window's end can hand the join out.
    let answerNow!: () => void;
    large.behaviour.hold = new Promise<void>((resolve) => (answerNow = resolve));
    try {
      const url = await ensemble('outer', { type: 'outer', windowMs: 200 });
      const answer = await predict(url);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('mlgraph-partial')).toBe('true');
      const body = (await answer.json()) as { partial: boolean; inputs: object };
      expect(body.partial).toBe(true);
      expect(Object.keys(body.inputs)).toEqual(['small']);
    } finally {
      large.behaviour.hold = undefined;
      answerNow();
    }
  });

  it('scores the request at an outlier node; the score travels with it to the next hops and the answer', async () => {
    const url = (
      await graph({
        graph: 'ns/outlier',
        root: 'odd',
        nodes: [
          {
            name: 'odd',
            kind: 'outlier',
            outlier: { reference: pathToFileURL(`${modelRoot}/edge.drift.json`).href },
            children: [{ node: 'small' }],
          },
          model('small', small),
        ],
      })
    ).url;
    const { test } = loadMnist();
    const digit = Array.from(test.x.subarray(0, 784));
    const noise = digit.map((_, i) => ((i * 7919) % 97) / 97);
    const send = (data: number[]) =>
      predict(url, { inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 784], data }] });
    const clean = await send(digit);
    expect(clean.status).toBe(200);
    expect(clean.headers.get('mlgraph-outlier')).toBe('false');
    const score = (answer: Response) =>
      Number(/^odd=(.+)$/.exec(answer.headers.get('mlgraph-outlier-score')!)![1]);
    // The model after it was told the score.
    expect(small.calls.at(-1)!.headers['mlgraph-outlier-score']).toBe(
      clean.headers.get('mlgraph-outlier-score'),
    );
    const shifted = await send(noise);
    expect(shifted.headers.get('mlgraph-outlier')).toBe('true');
    expect(score(shifted)).toBeGreaterThan(10 * score(clean));
    // What it scores must be in the request: a 400 naming the input.
    const wrong = await predict(url);
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { error: { message: string } }).error.message).toMatch(/input/);
  });

  /** A proxy to `target`: each request waits for `hold` first; `relayed` runs after each answer. */
  async function relay(
    target: string,
    options: { hold?: Promise<unknown>; relayed?: () => void },
  ): Promise<Listening> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          await options.hold;
          const answer = await fetch(`${target}${req.url}`, {
            method: req.method,
            headers: req.headers as Record<string, string>,
            body: Buffer.concat(chunks),
          });
          const body = Buffer.from(await answer.arrayBuffer());
          options.relayed?.();
          res.writeHead(answer.status, Object.fromEntries(answer.headers));
          res.end(body);
        })();
      });
    });
    const listening = await listen(server);
    servers.push(listening);
    return listening;
  }
});
