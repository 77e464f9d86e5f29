/**
 * fl-trainer's rounds against a fake aggregator (a real HTTP server serving the round status, a
 * tiny real model and taking or refusing updates as each test scripts), with a Dataset CSV in a
 * temp dir: a round trains and sends the protocol's update; a re-notification is answered at
 * once and trains nothing; refusals stop, 5xx are retried until the deadline, failures carry
 * their exit codes; a trainer started before its aggregator trains the round it missed; the
 * logs carry neither data nor weights. Clocks and delays are fakes: nothing sleeps.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeEvent, eventTypes, parseMediaType } from '../../../shared/events/index.js';
import type { IncomingEvent } from '../../../shared/events/index.js';
import { createTrainerClient } from '../../../shared/fl/client.js';
import { writeDatasetCsv } from '../../../shared/fl/dataset-file.js';
import { readDataset } from '../../../shared/fl/dataset-source.js';
import { inThreadTraining } from '../../../shared/fl/round-compute.js';
import { createTrainer } from '../../../shared/fl/trainer.js';
import type { RoundResult, Trainer } from '../../../shared/fl/trainer.js';
import type { TrainerConfig } from '../../../shared/fl/trainer-config.js';
import { flTrainerDefinition } from '../../../shared/fl/trainer-definition.js';
import { decodeWeights } from '../../../shared/fl/weights.js';
import { buildServer } from '../../../shared/http/index.js';
import { flUpdateAttributes, trainerFailed } from '../../../shared/messages/federated.js';
import type { RoundStarted, TrainerFailed } from '../../../shared/messages/federated.js';
import { seededRandom } from '../../../shared/random/index.js';
import { Network } from '../../../shared/training/network.js';
import { exportOnnx, readInitializers } from '../../../shared/training/onnx-export.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const job = 'default/mnist-fl';
const worker = 'dataset-a';
const start = Date.parse('2030-01-01T00:00:00.000Z');
const samples = 12;

/** A tiny real model (flatten, dense 10) as the aggregator would hand it out. */
function tinyModel(): Uint8Array {
  const network = new Network([1, 28, 28], [{ type: 'flatten' }, { type: 'dense', units: 10 }]);
  network.initialize(seededRandom(7));
  return exportOnnx(network, 'global', 'fl-trainer test');
}
const model = tinyModel();
const sha256 = createHash('sha256').update(model).digest('hex');

/** A few synthetic samples as the Dataset CSV (pixels 0-255, labels 0-9). */
function datasetCsv(): string {
  const uniform = seededRandom(3);
  const x = Float32Array.from({ length: samples * 784 }, () => uniform());
  const y = Uint8Array.from({ length: samples }, (_, i) => i % 10);
  return writeDatasetCsv({ x, y, n: samples });
}
const csv = datasetCsv();

interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  event: IncomingEvent | undefined;
}

interface Reply {
  status: number;
  body?: string | Uint8Array;
}
const json = (status: number, body: unknown): Reply => ({ status, body: JSON.stringify(body) });

/** How the fake aggregator answers; `model` may hold its answer (a promise). */
interface Script {
  round?: () => Reply;
  model?: () => Reply | Promise<Reply>;
  /** The n-th update (0-based). */
  update?: (n: number) => Reply;
}

interface FakeAggregator {
  url: string;
  received: Received[];
  updates(): Received[];
  failures(): TrainerFailed[];
  modelGets(): Received[];
  close(): Promise<void>;
}

function decode(headers: IncomingHttpHeaders, body: Buffer): IncomingEvent | undefined {
  const type = headers['content-type'];
  return decodeEvent(headers, body, type === undefined ? undefined : parseMediaType(type, 'ct'));
}

async function answer(received: Received, script: Script, updates: number): Promise<Reply> {
  if (received.method === 'GET' && received.path === '/v1/round') {
    return script.round?.() ?? { status: 503 };
  }
  if (received.method === 'GET' && received.path.startsWith('/models/')) {
    return (await script.model?.()) ?? { status: 200, body: model };
  }
  if (received.event?.type === eventTypes.flUpdate) {
    return script.update?.(updates) ?? { status: 202 };
  }
  return { status: 202 };
}

function aggregatorServer(script: Script, received: Received[]): Server {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const event = req.method === 'POST' ? decode(req.headers, body) : undefined;
      const updates = received.filter((r) => r.event?.type === eventTypes.flUpdate).length;
      const request = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
      received.push({ ...request, event });
      void answer({ ...request, event }, script, updates).then((reply) => {
        res.writeHead(reply.status, { 'content-type': 'application/json' });
        res.end(reply.body);
      });
    });
  });
}

/** The fake aggregator, on `port` (0: any). */
async function startAggregator(script: Script, port = 0): Promise<FakeAggregator> {
  const received: Received[] = [];
  const server = aggregatorServer(script, received);
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  const ofType = (type: string) => received.filter((r) => r.event?.type === type);
  return {
    url: `http://127.0.0.1:${address.port}`,
    received,
    updates: () => ofType(eventTypes.flUpdate),
    failures: () =>
      ofType(eventTypes.flTrainerFailed).map((r) => trainerFailed.parse(r.event!.data)),
    modelGets: () => received.filter((r) => r.path.startsWith('/models/')),
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A promise and its resolve, for holding an answer until the test lets it go. */
function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

let dir: string;
let datasetPath: string;

interface Built {
  trainer: Trainer;
  lines: Array<Record<string, unknown>>;
  delays: number[];
  /** The fake clock, advanced by every delay. */
  now(): number;
}

/** A trainer of `aggregatorUrl` with a fake clock that each delay moves forward. */
function build(
  aggregatorUrl: string,
  config: Partial<TrainerConfig> = {},
  onDelay?: (n: number) => Promise<void>,
): Built {
  let clock = start;
  const delays: number[] = [];
  const telemetry = capturedTelemetry('fl-trainer');
  const full = {
    job,
    worker,
    aggregatorUrl,
    datasetUrl: `file://${datasetPath}`,
    datasetFormat: 'csv',
    node: 'edge-1',
    token: 'node-token',
    maxModelBytes: 1 << 20,
    maxDatasetBytes: 1 << 24,
    ...config,
  };
  const client = createTrainerClient({ ...full, timeoutMs: 5_000 });
  const trainer = createTrainer({
    config: full,
    client,
    training: inThreadTraining({
      read: readDataset,
      source: { url: full.datasetUrl, format: full.datasetFormat, maxBytes: full.maxDatasetBytes },
    }),
    log: telemetry.log,
    now: () => clock,
    delay: async (ms) => {
      delays.push(ms);
      clock += ms;
      await onDelay?.(delays.length);
    },
  });
  return { trainer, lines: telemetry.lines, delays, now: () => clock };
}

const training = { epochs: 2, batchSize: 4, learningRate: 0.1, seed: 1, proximalMu: 0 };

function roundEvent(url: string, overrides: Partial<RoundStarted> = {}): RoundStarted {
  return {
    job,
    round: 1,
    base: 0,
    model: { url: `${url}/models/0`, sha256 },
    training,
    deadline: new Date(start + 60_000).toISOString(),
    ...overrides,
  };
}

async function trained(trainer: Trainer, event: RoundStarted): Promise<RoundResult> {
  const answer = await trainer.onRound(event);
  if (answer.kind !== 'done') throw new Error(`expected a finished round, got ${answer.kind}`);
  return answer.result;
}

const open: Array<{ close(): Promise<void> }> = [];
async function aggregator(script: Script = {}): Promise<FakeAggregator> {
  const fake = await startAggregator(script);
  open.push(fake);
  return fake;
}

/** The trainer served as the fl-trainer function. */
async function serve(trainer: Trainer): Promise<Listening> {
  const definition = flTrainerDefinition({
    trainer,
    node: 'edge-1',
    token: 'node-token',
    readiness: [],
  });
  const telemetry = capturedTelemetry('fl-trainer');
  const served = await listen(
    buildServer(definition, { telemetry, bodyLimitBytes: 1 << 20, readinessTimeoutMs: 1000 }),
  );
  open.push(served);
  return served;
}

describe('fl-trainer', () => {
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'fl-trainer-'));
    datasetPath = join(dir, 'dataset-a.csv');
    await writeFile(datasetPath, csv);
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((o) => o.close()));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('trains a round and sends exactly the protocol update, answering when done', async () => {
    const agg = await aggregator();
    const fn = await serve(build(agg.url).trainer);
    const response = await postEvent(fn.url, eventTypes.flRoundStarted, roundEvent(agg.url));
    expect(response.status).toBe(200);
    const body = (await response.json()) as RoundResult;
    expect(body).toMatchObject({ round: 1, outcome: 'sent', samples });
    expect(body.loss).toBeGreaterThan(0);
    expect(Number.isInteger(body.trainMs)).toBe(true);

    expect(agg.modelGets()).toHaveLength(1);
    expect(agg.modelGets()[0]!.headers['authorization']).toBe('Bearer node-token');
    const [update] = agg.updates();
    expect(agg.updates()).toHaveLength(1);
    const { headers, event } = update!;
    expect(headers).toMatchObject({
      'ce-specversion': '1.0',
      'ce-type': 'io.edgeai.fl.update',
      'ce-source': `/fl/${job}/trainers/${worker}`,
      'ce-id': `${worker}.r1`,
      'content-type': 'application/octet-stream',
      authorization: 'Bearer node-token',
      'x-edgeai-node': 'edge-1',
    });
    expect(flUpdateAttributes.parse(event!.extensions)).toEqual({
      fljob: job,
      flworker: worker,
      flround: 1,
      flbase: 0,
      flsamples: samples,
      flloss: body.loss,
      fltrainms: body.trainMs,
    });
    const weights = decodeWeights(event!.data as Uint8Array, { maxBytes: 1 << 20, maxTensors: 8 });
    const global = readInitializers(model);
    expect([...weights.keys()]).toEqual([...global.keys()]);
    expect(weights.get('dense1.weight')!.dims).toEqual([784, 10]);
    expect(weights.get('dense1.bias')!.values).not.toEqual(global.get('dense1.bias')!.values);
  });

  /** The round as the aggregator pushes it: binary, the model as data, the round in flstarted. */
  function pushRound(
    url: string,
    event: RoundStarted,
    body: Uint8Array,
    auth: Record<string, string>,
  ) {
    return fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'ce-specversion': '1.0',
        'ce-id': `push-${event.round}`,
        'ce-source': `/fl/${job}/aggregator`,
        'ce-type': eventTypes.flRoundStarted,
        'ce-flstarted': JSON.stringify(event),
        ...auth,
      },
      body,
    });
  }
  const credentials = { authorization: 'Bearer node-token', 'x-edgeai-node': 'edge-1' };

  it('trains from a model pushed with the round, downloading nothing', async () => {
    const agg = await aggregator();
    const fn = await serve(build(agg.url).trainer);
    const response = await pushRound(fn.url, roundEvent(agg.url), model, credentials);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ round: 1, outcome: 'sent', samples });
    expect(agg.modelGets()).toHaveLength(0);
    expect(agg.updates()).toHaveLength(1);
  });

  it('refuses a pushed model without this node token, and downloads one whose sha256 differs', async () => {
    const agg = await aggregator();
    const fn = await serve(build(agg.url).trainer);
    const event = roundEvent(agg.url);
    const none = await pushRound(fn.url, event, model, {});
    expect(none.status).toBe(401);
    const wrong = await pushRound(fn.url, event, model, {
      ...credentials,
      authorization: 'Bearer other',
    });
    expect(wrong.status).toBe(401);
    const otherNode = await pushRound(fn.url, event, model, {
      ...credentials,
      'x-edgeai-node': 'edge-2',
    });
    expect(otherNode.status).toBe(401);
    const garbled = await pushRound(fn.url, event, model, {
      ...credentials,
      'ce-flstarted': '{"job":',
    });
    expect(garbled.status).toBe(400);
    expect(await garbled.text()).toMatch(/flstarted: must be a round as JSON/);
    expect(agg.updates()).toHaveLength(0);

    const tampered = Uint8Array.from(model);
    tampered[tampered.length - 1]! ^= 1;
    const answered = await pushRound(fn.url, event, tampered, credentials);
    expect(answered.status).toBe(200);
    expect(agg.modelGets()).toHaveLength(1);
    expect(agg.updates()).toHaveLength(1);
  });

  it('answers a re-notification of the round in flight with 202 and trains once', async () => {
    const requested = deferred();
    const release = deferred();
    const agg = await aggregator({
      model: async () => {
        requested.resolve();
        await release.promise;
        return { status: 200, body: model };
      },
    });
    const fn = await serve(build(agg.url).trainer);
    const event = roundEvent(agg.url);
    const first = postEvent(fn.url, eventTypes.flRoundStarted, event);
    await requested.promise;
    const again = await postEvent(fn.url, eventTypes.flRoundStarted, event);
    expect(again.status).toBe(202);
    expect(await again.json()).toEqual({ round: 1, outcome: 'already-training' });
    release.resolve();
    const done = await first;
    expect(done.status).toBe(200);
    expect(await done.json()).toMatchObject({ outcome: 'sent' });
    expect(agg.modelGets()).toHaveLength(1);
    expect(agg.updates()).toHaveLength(1);
  });

  /** An aggregator whose first model download waits for `release` (a round in flight). */
  async function firstModelHeld() {
    const requested = deferred();
    const release = deferred();
    let gets = 0;
    const agg = await aggregator({
      model: async () => {
        gets += 1;
        if (gets === 1) {
          requested.resolve();
          await release.promise;
        }
        return { status: 200, body: model };
      },
    });
    return { agg, requested, release };
  }

  it('abandons a round when a newer one starts, and refuses an older one (409)', async () => {
    const { agg, requested, release } = await firstModelHeld();
    const { trainer } = build(agg.url);
    const first = trainer.onRound(roundEvent(agg.url, { round: 1 }));
    await requested.promise;
    const second = trainer.onRound(roundEvent(agg.url, { round: 2, base: 1 }));
    await expect(trainer.onRound(roundEvent(agg.url, { round: 1 }))).rejects.toThrow(
      /round 1 is older than round 2/,
    );
    release.resolve();
    const [old, next] = await Promise.all([first, second]);
    expect(old).toMatchObject({ kind: 'done', result: { round: 1, outcome: 'refused' } });
    expect(next).toMatchObject({ kind: 'done', result: { round: 2, outcome: 'sent' } });
    expect(agg.updates().map((u) => u.headers['ce-flround'])).toEqual(['2']);
    expect(agg.failures()).toEqual([]);
  });

  it('asynchronous rounds: keeps training a round whose update still counts, abandons one that would not', async () => {
    const { agg, requested, release } = await firstModelHeld();
    const { trainer } = build(agg.url);
    const first = trainer.onRound(roundEvent(agg.url, { round: 1, maxStaleness: 1 }));
    await requested.promise;
    // Round 2 trains from version 1: an update from version 0 is 1 behind, within maxStaleness.
    expect(
      await trainer.onRound(roundEvent(agg.url, { round: 2, base: 1, maxStaleness: 1 })),
    ).toEqual({ kind: 'already-training', round: 1 });
    // Round 3 trains from version 2: 2 behind, so the round in training is given up for it.
    const third = trainer.onRound(roundEvent(agg.url, { round: 3, base: 2, maxStaleness: 1 }));
    release.resolve();
    const [old, next] = await Promise.all([first, third]);
    expect(old).toMatchObject({ kind: 'done', result: { round: 1, outcome: 'refused' } });
    expect(next).toMatchObject({ kind: 'done', result: { round: 3, outcome: 'sent' } });
    expect(agg.updates().map((u) => u.headers['ce-flbase'])).toEqual(['2']);
  });

  it('stops at a 409 refusal without retrying or reporting a failure', async () => {
    const agg = await aggregator({
      update: () =>
        json(409, { error: { status: 409, reason: 'late', message: 'round 1 has closed' } }),
    });
    const built = build(agg.url);
    const result = await trained(built.trainer, roundEvent(agg.url));
    expect(result).toMatchObject({ round: 1, outcome: 'refused', samples });
    expect(result.reason).toMatch(/^late: round 1 has closed/);
    expect(agg.updates()).toHaveLength(1);
    expect(agg.failures()).toEqual([]);
    expect(built.delays).toEqual([]);
  });

  it('retries a 503 with backoff, then is accepted: the resend is the same event', async () => {
    const agg = await aggregator({ update: (n) => ({ status: n === 0 ? 503 : 202 }) });
    const built = build(agg.url);
    const result = await trained(built.trainer, roundEvent(agg.url));
    expect(result.outcome).toBe('sent');
    expect(agg.updates().map((u) => u.headers['ce-id'])).toEqual([`${worker}.r1`, `${worker}.r1`]);
    expect(built.delays).toHaveLength(1);
  });

  it('gives up at the deadline and reports a retryable failure (143)', async () => {
    const agg = await aggregator({ update: () => ({ status: 503 }) });
    const built = build(agg.url);
    const result = await trained(built.trainer, roundEvent(agg.url));
    expect(result).toMatchObject({ round: 1, outcome: 'failed', samples });
    expect(built.now()).toBeGreaterThanOrEqual(start + 60_000);
    expect(agg.updates().length).toBeGreaterThan(2);
    // Exponential, capped, and never past the deadline.
    expect(Math.max(...built.delays)).toBeLessThanOrEqual(15_000);
    // (The fake clock also moves by the real time training took: a fraction of a millisecond.)
    expect(built.delays.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(60_001);
    const [failure] = agg.failures();
    expect(failure).toMatchObject({ job, worker, round: 1, exitCode: 143 });
    expect(failure!.message).toMatch(/answered 503.*gave up at the round's deadline/);
    const report = agg.received.find((r) => r.event?.type === eventTypes.flTrainerFailed)!;
    expect(report.headers['authorization']).toBe('Bearer node-token');
    expect(report.headers['x-edgeai-node']).toBe('edge-1');
  });

  it('retries a model download that fails for a while', async () => {
    let gets = 0;
    const agg = await aggregator({
      model: () => ((gets += 1) <= 2 ? { status: 502 } : { status: 200, body: model }),
    });
    const built = build(agg.url);
    expect((await trained(built.trainer, roundEvent(agg.url))).outcome).toBe('sent');
    expect(agg.modelGets()).toHaveLength(3);
    expect(built.delays).toHaveLength(2);
  });

  it.each([400, 401, 403, 413])('stops at a %i and reports failure 1', async (status) => {
    const agg = await aggregator({ update: () => json(status, { error: { message: 'no' } }) });
    const built = build(agg.url);
    const result = await trained(built.trainer, roundEvent(agg.url));
    expect(result.outcome).toBe('failed');
    expect(agg.updates()).toHaveLength(1);
    expect(agg.failures()).toMatchObject([{ round: 1, exitCode: 1 }]);
    expect(built.delays).toEqual([]);
  });

  it('reports failure 2 for a missing dataset, another format, or a malformed file', async () => {
    const agg = await aggregator();
    const bad = join(dir, 'bad.csv');
    await writeFile(bad, `${csv}7,1,2,secretvalue\n`);
    const cases: Array<[Partial<TrainerConfig>, RegExp]> = [
      [{ datasetUrl: join(dir, 'missing.csv') }, /ENOENT/],
      [{ datasetFormat: 'txt' }, /DATASET_FORMAT "txt" is not supported/],
      [{ datasetUrl: bad }, /line 14, column 4 \(p2\): a value is not a pixel/],
    ];
    for (const [config, message] of cases) {
      const result = await trained(build(agg.url, config).trainer, roundEvent(agg.url));
      expect(result.outcome).toBe('failed');
      expect(agg.failures().at(-1)).toMatchObject({ exitCode: 2, round: 1 });
      expect(agg.failures().at(-1)!.message).toMatch(message);
    }
    expect(JSON.stringify(agg.failures())).not.toContain('secretvalue');
    expect(agg.updates()).toEqual([]);
  });

  it('reports failure 3 for a model it cannot rebuild', async () => {
    const notModel = new TextEncoder().encode('{"not": "an onnx model"}');
    const agg = await aggregator({ model: () => ({ status: 200, body: notModel }) });
    const digest = createHash('sha256').update(notModel).digest('hex');
    const event = roundEvent(agg.url, { model: { url: `${agg.url}/models/0`, sha256: digest } });
    const result = await trained(build(agg.url).trainer, event);
    expect(result.outcome).toBe('failed');
    expect(agg.failures()).toMatchObject([{ exitCode: 3 }]);
    expect(agg.updates()).toEqual([]);
  });

  it('reports a retryable failure for a model whose sha256 differs, and sends nothing', async () => {
    const agg = await aggregator();
    const event = roundEvent(agg.url, {
      model: { url: `${agg.url}/models/0`, sha256: 'b'.repeat(64) },
    });
    const result = await trained(build(agg.url).trainer, event);
    expect(result.outcome).toBe('failed');
    expect(agg.failures()).toMatchObject([{ exitCode: 143 }]);
    expect(agg.failures()[0]!.message).toMatch(/sha256/);
    expect(agg.updates()).toEqual([]);
  });

  it('answers 400 for a model URL off the aggregator origin or another job', async () => {
    const agg = await aggregator();
    const other = await aggregator();
    const fn = await serve(build(agg.url).trainer);
    const elsewhere = roundEvent(agg.url, { model: { url: `${other.url}/models/0`, sha256 } });
    const response = await postEvent(fn.url, eventTypes.flRoundStarted, elsewhere);
    expect(response.status).toBe(400);
    const error = ((await response.json()) as { error: { message: string } }).error;
    expect(error.message).toContain(`${other.url}/models/0 is not on the aggregator's origin`);
    const wrongJob = roundEvent(agg.url, { job: 'default/other-job' });
    expect((await postEvent(fn.url, eventTypes.flRoundStarted, wrongJob)).status).toBe(400);
    expect(agg.received).toEqual([]);
    expect(other.received).toEqual([]);
  });

  it('refuses a round whose deadline has passed without training it', async () => {
    const agg = await aggregator();
    const event = roundEvent(agg.url, { deadline: new Date(start - 1).toISOString() });
    const result = await trained(build(agg.url).trainer, event);
    expect(result).toMatchObject({ outcome: 'refused', samples: 0 });
    expect(agg.received).toEqual([]);
  });

  it('started before its aggregator, waits for it and trains the open round it missed', async () => {
    // A port nothing listens on yet: connections are refused until the aggregator starts.
    const probe = await listen(createServer());
    const url = probe.url;
    await probe.close();
    const port = Number(new URL(url).port);
    let agg: FakeAggregator | undefined;
    const status = {
      job,
      round: 1,
      base: 0,
      status: 'open',
      selected: [worker, 'dataset-b'],
      submitted: ['dataset-b'],
      deadline: new Date(start + 3_600_000).toISOString(),
      model: { url: `${url}/models/0`, sha256 },
      training,
    };
    const built = build(url, {}, async (n) => {
      if (n !== 3) return;
      agg = await startAggregator({ round: () => json(200, status) }, port);
      open.push(agg);
    });
    await built.trainer.startupPoll(new AbortController().signal);
    expect(built.delays).toHaveLength(3);
    expect(agg!.received.filter((r) => r.path === '/v1/round')).toHaveLength(1);
    expect(agg!.updates()).toHaveLength(1);
    expect(agg!.updates()[0]!.headers['ce-flround']).toBe('1');
  });

  it.each([
    ['done', [worker], []],
    ['open', ['dataset-b'], []],
    ['open', [worker], [worker]],
    ['aggregating', [worker], []],
  ])(
    'polls once and trains nothing when the round is %s (selected %j, submitted %j)',
    async (state, selected, submitted) => {
      const agg = await aggregator({
        round: () =>
          json(200, {
            job,
            round: 2,
            base: 1,
            status: state,
            selected,
            submitted,
            deadline: new Date(start + 60_000).toISOString(),
            model: { url: `http://127.0.0.1:1/models/1`, sha256 },
            training,
          }),
      });
      const built = build(agg.url);
      await built.trainer.startupPoll(new AbortController().signal);
      expect(agg.received.map((r) => r.path)).toEqual(['/v1/round']);
    },
  );

  it('logs neither training data nor weights', async () => {
    const agg = await aggregator();
    const built = build(agg.url, { token: undefined });
    const result = await trained(built.trainer, roundEvent(agg.url));
    expect(result.outcome).toBe('sent');
    const bad = join(dir, 'leaky.csv');
    await writeFile(bad, `${csv}7,${'1,'.repeat(500)}leakymarker\n`);
    const leaky = build(agg.url, { datasetUrl: bad });
    expect((await trained(leaky.trainer, roundEvent(agg.url))).outcome).toBe('failed');
    const logged = JSON.stringify([...built.lines, ...leaky.lines]);
    expect(logged).not.toContain('leakymarker');
    expect(built.lines.some((l) => String(l['msg']).includes('EDGEAI_NODE_TOKEN'))).toBe(true);
    const dataLine = csv.split('\n')[1]!;
    expect(logged).not.toContain(dataLine.slice(0, 40));
    const update = agg.updates()[0]!;
    const weights = decodeWeights(update.event!.data as Uint8Array, {
      maxBytes: 1 << 20,
      maxTensors: 8,
    });
    const someWeights = [...weights.get('dense1.weight')!.values.slice(0, 3)].map(String);
    for (const value of someWeights) expect(logged).not.toContain(value);
    expect(logged).not.toContain('EAFW');
    expect(JSON.stringify(agg.failures())).not.toContain('leakymarker');
  });
});
