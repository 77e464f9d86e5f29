/**
 * fl-aggregator over HTTP, with the real Redis and a real model: an update as the binary-mode
 * CloudEvent the protocol names, answered 202 / 200 / 409 with the reason; who may send it
 * (401 without a token, 403 with another node's); tensors that do not fit (400); the round and
 * the models as plain GETs; a trainer's failure; and nothing of the weights in the logs.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAggregator } from '../../../shared/fl/aggregator.js';
import type { Aggregator } from '../../../shared/fl/aggregator.js';
import { flAggregatorDefinition } from '../../../shared/fl/aggregator-definition.js';
import { createRoundStore } from '../../../shared/fl/round-store.js';
import { encodeWeights } from '../../../shared/fl/weights.js';
import type { Tensor } from '../../../shared/fl/weights.js';
import { buildServer } from '../../../shared/http/index.js';
import type { FlJobConfig } from '../../../shared/messages/federated.js';
import { seededRandom } from '../../../shared/random/index.js';
import { Network } from '../../../shared/training/network.js';
import { exportOnnx, readInitializers } from '../../../shared/training/onnx-export.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const network = new Network([1, 2, 2], [{ type: 'flatten' }, { type: 'dense', units: 3 }]);
network.initialize(seededRandom(5));
const model0 = exportOnnx(network, 'initial', 'test');
const tokens = new Map([
  ['edge0', Buffer.from('token-0')],
  ['edge1', Buffer.from('token-1')],
]);
const config: FlJobConfig = {
  job: 'default/digits',
  uid: 'u1',
  initialModel: { url: 'file:///models/m.onnx' },
  trainers: ['edge0', 'edge1'].map((name) => ({
    name,
    node: `node-${name}`,
    url: `http://${name}`,
  })),
  round: { minParticipants: 2, timeoutMs: 60_000, acceptFailures: true },
  stop: { maxRounds: 3, patience: 1 },
  training: { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 1, proximalMu: 0 },
  aggregation: { kind: 'fedavg' },
  selection: { fraction: 1, minimum: 1, seed: 1 },
  publicUrl: 'http://digits-aggregator.default.svc.cluster.local',
};

function weights(fill: number): Uint8Array {
  const out = new Map<string, Tensor>();
  for (const [name, t] of readInitializers(model0))
    out.set(name, { dims: [...t.dims], values: new Float32Array(t.values.length).fill(fill) });
  return encodeWeights(out);
}

/** An aggregator of `job` on `redis`, not started, served over HTTP by its definition. */
async function served(
  redis: TestRedis,
  telemetry: ReturnType<typeof capturedTelemetry>,
  job: FlJobConfig = config,
) {
  const store = createRoundStore(redis.client, `default/digits/${randomUUID()}`);
  const aggregator = createAggregator({
    config: job,
    store,
    initialModel: () => Promise.resolve(model0),
    notify: () => Promise.resolve(),
    announce: () => Promise.resolve(),
    now: Date.now,
    schedule: () => () => {},
    log: telemetry.log,
    leaseMs: 5000,
    maxUpdateBytes: 1 << 20,
  });
  const definition = flAggregatorDefinition({
    config: job,
    aggregator,
    tokens,
    maxUpdateBytes: 1 << 20,
    readiness: [],
  });
  const fn = await listen(
    buildServer(definition, { telemetry, bodyLimitBytes: 2 << 20, readinessTimeoutMs: 1000 }),
  );
  return { aggregator, fn, store };
}

describe('fl-aggregator over HTTP', () => {
  let redis: TestRedis;
  let fn: Listening;
  let aggregator: Aggregator;
  const telemetry = capturedTelemetry('fl-aggregator');

  beforeAll(async () => {
    redis = await testRedis();
    ({ aggregator, fn } = await served(redis, telemetry));
    await aggregator.start();
  });
  afterAll(async () => {
    await fn.close();
    await redis.close();
  });

  const update = (
    worker: string,
    over: {
      round?: number;
      base?: number;
      token?: string;
      node?: string;
      body?: Uint8Array;
      url?: string;
    } = {},
  ) =>
    fetch(`${over.url ?? fn.url}/`, {
      method: 'POST',
      headers: {
        'ce-specversion': '1.0',
        'ce-type': 'io.edgeai.fl.update',
        'ce-source': `/fl/default/digits/trainers/${worker}`,
        'ce-id': `${worker}.r${over.round ?? 1}`,
        'ce-fljob': 'default/digits',
        'ce-flworker': worker,
        'ce-flround': String(over.round ?? 1),
        'ce-flbase': String(over.base ?? 0),
        'ce-flsamples': '20',
        'ce-flloss': '0.5',
        'ce-fltrainms': '1200',
        'content-type': 'application/octet-stream',
        ...(over.token === ''
          ? {}
          : { authorization: `Bearer ${over.token ?? tokens.get(worker)?.toString()}` }),
        'x-edgeai-node': over.node ?? `node-${worker}`,
      },
      body: over.body ?? weights(1),
    });

  it('answers the round a trainer may join', async () => {
    const round = (await (await fetch(`${fn.url}/v1/round`)).json()) as { model: { url: string } };
    expect(round).toMatchObject({
      job: 'default/digits',
      round: 1,
      base: 0,
      status: 'open',
      submitted: [],
    });
    expect(round.model.url).toBe('http://digits-aggregator.default.svc.cluster.local/v1/models/0');
  });

  it('serves the models it keeps as bytes, and 404 for one it does not', async () => {
    const answer = await fetch(`${fn.url}/v1/models/0`);
    expect(answer.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await answer.arrayBuffer()).equals(Buffer.from(model0))).toBe(true);
    expect((await fetch(`${fn.url}/v1/models/9`)).status).toBe(404);
  });

  it('refuses an update without a token (401) or signed by another node (403)', async () => {
    expect((await update('edge0', { token: '' })).status).toBe(401);
    const foreign = await update('edge0', { node: 'node-edge1', token: 'token-1' });
    expect(foreign.status).toBe(403);
    expect(await foreign.text()).toMatch(/trainer edge0 runs on node node-edge0/);
  });

  it('refuses tensors that do not fit the model with a 400 naming them', async () => {
    const wrong = encodeWeights(
      new Map([['dense1.weight', { dims: [1], values: new Float32Array(1) }]]),
    );
    const answer = await update('edge0', { body: wrong });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toMatch(/dense1\.weight/);
  });

  it('accepts an update (202), counts its resend once (200), refuses the wrong round (409)', async () => {
    expect((await update('edge0')).status).toBe(202);
    const again = await update('edge0');
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ outcome: 'duplicate', updates: 1 });
    const future = await update('edge1', { round: 2, base: 1 });
    expect(future.status).toBe(409);
    expect(((await future.json()) as { error: unknown }).error).toMatchObject({ reason: 'future' });
  });

  it("answers an update that comes while its round is being aggregated: FedBuff's 503 with Retry-After (it joins the next buffer when sent again), a synchronous round's 409", async () => {
    const fedbuff: FlJobConfig = {
      ...config,
      aggregation: {
        kind: 'fedbuff',
        bufferSize: 2,
        maxStaleness: 2,
        stalenessExponent: 0.5,
        eta: 1,
      },
    };
    for (const [job, status] of [
      [fedbuff, 503],
      [config, 409],
    ] as const) {
      const other = await served(redis, capturedTelemetry('fl-aggregator'), job);
      try {
        await other.aggregator.start();
        const { round } = (await other.store.state())!;
        // Another replica's close under way: the round claimed at its deadline, its lease held.
        const late = Date.now() + 2 * job.round.timeoutMs;
        expect(await other.store.claim(round, 'another', late, 60_000)).toMatchObject({
          kind: 'claimed',
        });
        const answer = await update('edge1', { url: other.fn.url });
        expect(answer.status).toBe(status);
        expect(answer.headers.get('retry-after')).toBe(status === 503 ? '1' : null);
        expect(await answer.json()).toMatchObject({ error: { status, reason: 'closed' } });
      } finally {
        await other.fn.close();
      }
    }
  });

  it("takes a trainer's failure, signed by its node", async () => {
    const answer = await fetch(`${fn.url}/`, {
      method: 'POST',
      headers: {
        'ce-specversion': '1.0',
        'ce-type': 'io.edgeai.fl.trainer.failed',
        'ce-source': '/fl/default/digits/trainers/edge1',
        'ce-id': 'f1',
        'content-type': 'application/json',
        authorization: 'Bearer token-1',
        'x-edgeai-node': 'node-edge1',
      },
      body: JSON.stringify({
        job: 'default/digits',
        worker: 'edge1',
        round: 1,
        exitCode: 2,
        message: 'no dataset',
      }),
    });
    expect(answer.status).toBe(202);
  });

  it('closes the round on its quorum and keeps the weights out of the logs', async () => {
    expect((await update('edge1')).status).toBe(202);
    await aggregator.tick();
    expect(await (await fetch(`${fn.url}/v1/round`)).json()).toMatchObject({ round: 2, base: 1 });
    const logged = JSON.stringify(telemetry.lines);
    expect(logged).not.toMatch(/token-0|token-1/);
    expect(logged.length).toBeLessThan(20_000);
  });
});

describe('fl-aggregator before its job starts', () => {
  it('answers GET /v1/round with a retryable 503, logged as a request and not as a failure', async () => {
    const redis = await testRedis();
    const telemetry = capturedTelemetry('fl-aggregator');
    const { aggregator, fn } = await served(redis, telemetry);
    try {
      const answer = await fetch(`${fn.url}/v1/round`);
      expect(answer.status).toBe(503);
      expect(answer.headers.get('retry-after')).toBe('1');
      expect(await answer.json()).toEqual({
        error: { status: 503, reason: 'UnavailableError', message: 'the job has not started yet' },
      });
      const request = telemetry.lines.find((l) => l['path'] === '/v1/round');
      expect(request).toMatchObject({ status: 503, msg: 'request' });
      expect(telemetry.lines.filter((l) => Number(l['level']) >= 50)).toEqual([]);
      // Started, the same route answers the round.
      await aggregator.start();
      expect((await fetch(`${fn.url}/v1/round`)).status).toBe(200);
    } finally {
      await fn.close();
      await redis.close();
    }
  });
});
