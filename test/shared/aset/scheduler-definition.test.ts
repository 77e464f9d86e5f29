/**
 * aset-scheduler's answers over real HTTP and a real Redis: a rejection is a 409 naming the
 * constraints, events get reply events of other types, an ended stream's event is accepted
 * whether or not it was bound, and response reports need the token and count once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBindingStore } from '../../../shared/aset/binding-store.js';
import { loadAsetSchedulerConfig } from '../../../shared/aset/scheduler-config.js';
import { asetSchedulerDefinition } from '../../../shared/aset/scheduler-definition.js';
import { createAsetScheduler } from '../../../shared/aset/scheduler.js';
import { eventTypes } from '../../../shared/events/index.js';
import { buildServer } from '../../../shared/http/index.js';
import { tiny } from '../../support/aset.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const topology = tiny('v', true);
const token = 'a-monitoring-token-of-some-length';
const stream = {
  scheduler: 'ap-0',
  task: 'object-detection',
  maxDelayMs: 200,
  minAccuracy: 30,
  rate: 10,
  size: 1,
  durationS: 60,
};

describe('aset-scheduler function', () => {
  let redis: TestRedis;
  let server: Listening;
  let rolls = 0;
  const clock = { now: 5_000_000 };
  const store = () =>
    createBindingStore(redis.client, {
      topology: 'tiny',
      workers: topology.workers.length,
      tombstoneMs: 60_000,
      dedupeSeconds: 3600,
    });

  beforeAll(async () => {
    redis = await testRedis();
    const scheduler = createAsetScheduler({
      topology,
      store: store(),
      controller: {
        name: 'fixed',
        choose: (previous) => {
          if (previous !== undefined) rolls += 1;
          return 'closest';
        },
      },
      windowMs: 10_000,
      leaseGraceMs: 0,
      now: () => clock.now,
      uniform: () => 0.5,
    });
    server = await listen(
      buildServer(asetSchedulerDefinition({ scheduler, reportToken: token, readiness: [] }), {
        telemetry: capturedTelemetry('aset-scheduler'),
        bodyLimitBytes: 4096,
        readinessTimeoutMs: 1000,
      }),
    );
  });
  afterAll(async () => {
    await server.close();
    await redis.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('answers 409 with the failing constraints when no worker can take a stream', async () => {
    const answer = await post('/v1/streams', { id: 'too-tight', ...stream, maxDelayMs: 3 });
    expect(answer.status).toBe(409);
    expect(await answer.json()).toMatchObject({
      error: 'StreamRejected',
      id: 'too-tight',
      policy: 'closest',
      reasons: { task: 0, capacity: 0, delay: 2, accuracy: 0 },
      message: "no worker meets the stream's requirements: delay fails on 2 of 2",
    });
  });

  it('names the field a bad request gets wrong', async () => {
    const answer = await post('/v1/streams', { id: 'bad id!', ...stream, size: 2 });
    expect(answer.status).toBe(400);
    const text = await answer.text();
    expect(text).toContain('id');
    expect(text).toContain('size');
  });

  it('replies stream.bound and stream.rejected to stream.requested events', async () => {
    const bound = await postEvent(server.url, eventTypes.streamRequested, {
      id: 'ev-1',
      ...stream,
    });
    expect(bound.status).toBe(200);
    expect(bound.headers.get('ce-type')).toBe(eventTypes.streamBound);
    expect(await bound.json()).toMatchObject({ id: 'ev-1', worker: { cluster: 'access-0' } });
    const rejected = await postEvent(server.url, eventTypes.streamRequested, {
      id: 'ev-2',
      ...stream,
      minAccuracy: 99,
    });
    expect(rejected.headers.get('ce-type')).toBe(eventTypes.streamRejected);
    expect(rejected.headers.get('ce-subject')).toBe('ev-2');
  });

  it('accepts stream.ended whether or not the stream is bound, and frees it once', async () => {
    await post('/v1/streams', { id: 'to-end', ...stream });
    const before = (await store().loads([0]))[0]!;
    for (let i = 0; i < 2; i += 1) {
      const ended = await postEvent(server.url, eventTypes.streamEnded, { id: 'to-end' });
      expect(ended.status).toBe(202);
    }
    expect((await store().loads([0]))[0]).toBe(before - 10);
    const get = await fetch(`${server.url}/v1/streams/to-end`);
    expect(get.status).toBe(404);
  });

  it('takes response reports only with the token, and counts a resent one once', async () => {
    const report = { id: 'rep-1', reports: [{ variant: 'v', cluster: 'access-0', responses: 40 }] };
    expect((await post('/v1/responses', report)).status).toBe(401);
    expect(
      (await post('/v1/responses', report, { authorization: 'Bearer not-the-token-at-all' }))
        .status,
    ).toBe(401);
    const auth = { authorization: `Bearer ${token}` };
    expect(await (await post('/v1/responses', report, auth)).json()).toEqual({ applied: true });
    expect(await (await post('/v1/responses', report, auth)).json()).toEqual({ applied: false });
    // Events carry no token: with one configured they are refused, or anyone could post them.
    const event = await postEvent(server.url, eventTypes.workerResponsesReported, report);
    expect(event.status).toBe(403);
  });

  it('rejects, by a reply event, a requested stream that has already ended', async () => {
    // The end overtook the request (a redelivery after a failure, say).
    expect((await postEvent(server.url, eventTypes.streamEnded, { id: 'overtaken' })).status).toBe(
      202,
    );
    const late = await postEvent(server.url, eventTypes.streamRequested, {
      id: 'overtaken',
      ...stream,
    });
    expect(late.status).toBe(200);
    expect(late.headers.get('ce-type')).toBe(eventTypes.streamRejected);
    expect(await late.json()).toMatchObject({ id: 'overtaken', message: /has ended/ });
    expect((await post('/v1/streams', { id: 'overtaken', ...stream })).status).toBe(409);
  });

  it('rolls a due window on the PingSource tick', async () => {
    await postEvent(server.url, eventTypes.pingTick, {});
    const before = rolls;
    clock.now += 10_000;
    const tick = await postEvent(server.url, eventTypes.pingTick, {});
    expect(tick.status).toBe(202);
    expect(rolls).toBe(before + 1);
    const status = (await (await fetch(`${server.url}/v1/scheduler`)).json()) as {
      windowStart: string;
      policy: string;
    };
    expect(status).toMatchObject({
      windowStart: new Date(clock.now).toISOString(),
      policy: 'closest',
    });
  });
});

describe('aset-scheduler settings', () => {
  it('reads the defaults and resolves directories against the working directory', () => {
    expect(loadAsetSchedulerConfig({ ASET_TOPOLOGY: 'full-edge' }, '/app')).toMatchObject({
      topology: 'full-edge',
      dataDir: new URL('file:///app/data/aset/'),
      modelsDir: new URL('file:///app/models/'),
      windowMs: 25_000,
      leaseGraceMs: 30_000,
      reportToken: undefined,
    });
  });

  it.each([
    [{}, /ASET_TOPOLOGY/],
    [{ ASET_TOPOLOGY: '../etc' }, /ASET_TOPOLOGY: must be a topology name/],
    [{ ASET_TOPOLOGY: 't', ASET_REPORT_TOKEN: 'short' }, /ASET_REPORT_TOKEN: must be at least 16/],
    [
      { ASET_TOPOLOGY: 't', ASET_ENDPOINT_TEMPLATE: 'http://{worker}.x' },
      /unknown placeholder \{worker\}/,
    ],
    [{ ASET_TOPOLOGY: 't', ASET_ENDPOINT_TEMPLATE: 'ftp://{variant}' }, /must be an http\(s\) URL/],
    [{ ASET_TOPOLOGY: 't', ASET_DEDUPE_SECONDS: '5' }, /ASET_DEDUPE_SECONDS/],
  ])('refuses %o', (env, message) => {
    expect(() => loadAsetSchedulerConfig(env, '/app')).toThrow(message);
  });
});
