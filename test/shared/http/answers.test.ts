/**
 * The answer contract of shared/http, over real HTTP: one row per status, each asserting that
 * the body names the problem; plus health, metrics, trace propagation and the log line.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UnavailableError } from '../../../shared/errors/index.js';
import { buildServer, defineFunction, onEvent, onRequest } from '../../../shared/http/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const limit = 4096;
let ready = true;
const telemetry = capturedTelemetry('answers');

const definition = defineFunction({
  name: 'answers',
  events: [
    onEvent({
      type: 'io.edgeai.test.echo',
      data: z.object({ count: z.number().int().nonnegative(), label: z.string() }),
      replies: ['io.edgeai.test.echoed'],
      handle: async ({ data, event }) => ({
        kind: 'reply',
        event: {
          type: 'io.edgeai.test.echoed',
          subject: event.id,
          data: { count: data.count + 1 },
        },
      }),
    }),
    onEvent({
      type: 'io.edgeai.test.accept',
      data: z.unknown(),
      handle: async () => ({ kind: 'accepted' }),
    }),
    onEvent({
      type: 'io.edgeai.test.unavailable',
      data: z.unknown(),
      handle: async () => {
        throw new UnavailableError('model store unreachable', 3);
      },
    }),
    onEvent({
      type: 'io.edgeai.test.bug',
      data: z.unknown(),
      handle: async () => {
        throw new Error('password=hunter2 leaked from internals');
      },
    }),
    onEvent({
      type: 'io.edgeai.test.undeclared',
      data: z.unknown(),
      handle: async () => ({ kind: 'reply', event: { type: 'io.edgeai.test.surprise', data: {} } }),
    }),
  ],
  routes: [
    onRequest({
      method: 'POST',
      path: '/items/:name',
      params: z.object({ name: z.string().regex(/^[a-z0-9-]{1,63}$/, 'must be a DNS label') }),
      body: z.object({ size: z.number().positive() }),
      handle: async ({ params, body }) => ({
        kind: 'json',
        status: 201,
        body: { name: params.name, size: body.size },
      }),
    }),
  ],
  readiness: [
    {
      name: 'flag',
      check: async () => {
        if (!ready) throw new Error('flag is down');
      },
    },
  ],
});

function ce(type: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    'ce-specversion': '1.0',
    'ce-id': `id-${Math.random()}`,
    'ce-source': '/test',
    'ce-type': type,
    'content-type': 'application/json',
    ...extra,
  };
}

interface Row {
  name: string;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  status: number;
  message?: RegExp;
  header?: [string, string];
}

const structured = (fields: Record<string, unknown>) =>
  JSON.stringify({ specversion: '1.0', id: 'abc', source: '/test', ...fields });

const rows: Row[] = [
  { name: 'accepted event', headers: ce('io.edgeai.test.accept'), body: '{}', status: 202 },
  {
    name: 'plain route',
    method: 'POST',
    path: '/items/disk-1',
    headers: { 'content-type': 'application/json' },
    body: '{"size":3}',
    status: 201,
  },
  {
    name: 'missing ce-source',
    headers: { ...ce('io.edgeai.test.accept'), 'ce-source': '' },
    body: '{}',
    status: 400,
    message: /ce-source/,
  },
  {
    name: 'bad specversion',
    headers: ce('io.edgeai.test.accept', { 'ce-specversion': '2.0' }),
    body: '{}',
    status: 400,
    message: /ce-specversion: must be "1.0" or "0.3"/,
  },
  {
    name: 'bad ce-time',
    headers: ce('io.edgeai.test.accept', { 'ce-time': 'yesterday' }),
    body: '{}',
    status: 400,
    message: /ce-time/,
  },
  {
    name: 'bad extension name',
    headers: ce('io.edgeai.test.accept', { 'ce-bad_ext': 'x' }),
    body: '{}',
    status: 400,
    message: /"bad_ext": extension names/,
  },
  {
    name: 'data field of the wrong type',
    headers: ce('io.edgeai.test.echo'),
    body: '{"count":"two","label":"x"}',
    status: 400,
    message: /data\.count: Invalid input: expected number, received string/,
  },
  {
    name: 'negative count',
    headers: ce('io.edgeai.test.echo'),
    body: '{"count":-1,"label":"x"}',
    status: 400,
    message: /data\.count: Too small/,
  },
  {
    name: 'missing data field',
    headers: ce('io.edgeai.test.echo'),
    body: '{"count":1}',
    status: 400,
    message: /data\.label/,
  },
  {
    name: 'data not JSON',
    headers: ce('io.edgeai.test.echo'),
    body: '{"count":',
    status: 400,
    message: /data: not valid JSON/,
  },
  {
    name: 'structured envelope not JSON',
    headers: { 'content-type': 'application/cloudevents+json' },
    body: '{oops',
    status: 400,
    message: /structured CloudEvent: not valid JSON/,
  },
  {
    name: 'structured envelope without id',
    headers: { 'content-type': 'application/cloudevents+json' },
    body: JSON.stringify({ specversion: '1.0', source: '/x', type: 'io.edgeai.test.accept' }),
    status: 400,
    message: /CloudEvent\.id: Invalid input: expected string, received undefined/,
  },
  {
    name: 'event type not handled',
    headers: ce('io.edgeai.test.other'),
    body: '{}',
    status: 400,
    message: /"io.edgeai.test.other" is not handled by answers \(handles: io.edgeai.test.echo/,
  },
  {
    name: 'plain JSON posted where events go',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    status: 400,
    message: /not a CloudEvent: send ce-specversion/,
  },
  {
    name: 'route body of the wrong shape',
    path: '/items/disk-1',
    headers: { 'content-type': 'application/json' },
    body: '{"size":0}',
    status: 400,
    message: /body\.size: Too small/,
  },
  {
    name: 'route path parameter invalid',
    path: '/items/Disk_1',
    headers: { 'content-type': 'application/json' },
    body: '{"size":1}',
    status: 400,
    message: /path\.name: must be a DNS label/,
  },
  {
    name: 'malformed Content-Type',
    headers: { 'content-type': 'application json' },
    body: '{}',
    status: 400,
    message: /Content-Type: malformed media type/,
  },
  {
    name: 'unknown path',
    method: 'GET',
    path: '/nope',
    status: 404,
    message: /no route for GET \/nope/,
  },
  {
    name: 'GET on the event endpoint',
    method: 'GET',
    status: 405,
    message: /GET \/ is not served/,
    header: ['allow', 'POST'],
  },
  {
    name: 'DELETE on a route',
    method: 'DELETE',
    path: '/items/disk-1',
    status: 405,
    header: ['allow', 'POST'],
  },
  {
    name: 'POST on a probe',
    path: '/health/liveness',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    status: 405,
    header: ['allow', 'GET'],
  },
  {
    name: 'body over the limit (Content-Length)',
    headers: ce('io.edgeai.test.accept'),
    body: JSON.stringify({ pad: 'x'.repeat(limit) }),
    status: 413,
    message: new RegExp(`exceeds the limit of ${limit} bytes`),
  },
  {
    name: 'route body not JSON',
    path: '/items/disk-1',
    headers: { 'content-type': 'text/plain' },
    body: 'size=1',
    status: 415,
    message: /Content-Type must be application\/json \(got text\/plain\)/,
  },
  {
    name: 'batched events',
    headers: { 'content-type': 'application/cloudevents-batch+json' },
    body: '[]',
    status: 415,
    message: /batched CloudEvents are not supported/,
  },
  {
    name: 'structured format other than JSON',
    headers: { 'content-type': 'application/cloudevents+xml' },
    body: '<x/>',
    status: 415,
    message: /application\/cloudevents\+xml is not supported/,
  },
  {
    name: 'unknown charset',
    headers: { ...ce('io.edgeai.test.accept'), 'content-type': 'text/plain; charset=klingon' },
    body: 'qapla',
    status: 415,
    message: /unsupported charset "klingon"/,
  },
  {
    name: 'an unsupported compression',
    headers: { ...ce('io.edgeai.test.accept'), 'content-encoding': 'br' },
    body: 'xx',
    status: 415,
    message: /Content-Encoding br is not supported \(gzip, deflate or identity\)/,
  },
  {
    name: 'a body that is not the gzip it claims',
    headers: { ...ce('io.edgeai.test.accept'), 'content-encoding': 'gzip' },
    body: 'xx',
    status: 400,
    message: /body: not valid gzip data/,
  },
  {
    name: 'dependency down',
    headers: ce('io.edgeai.test.unavailable'),
    body: '{}',
    status: 503,
    message: /model store unreachable/,
    header: ['retry-after', '3'],
  },
  {
    name: 'bug in a handler',
    headers: ce('io.edgeai.test.bug'),
    body: '{}',
    status: 500,
    message: /^internal error$/,
  },
  {
    name: 'reply of an undeclared type',
    headers: ce('io.edgeai.test.undeclared'),
    body: '{}',
    status: 500,
    message: /^internal error$/,
  },
];

describe('shared/http answers', () => {
  let server: Listening;
  beforeAll(async () => {
    server = await listen(
      buildServer(definition, { telemetry, bodyLimitBytes: limit, readinessTimeoutMs: 200 }),
    );
  });
  afterAll(() => server.close());

  it.each(rows)('$status: $name', async (row) => {
    const res = await fetch(server.url + (row.path ?? '/'), {
      method: row.method ?? 'POST',
      headers: row.headers ?? {},
      ...(row.body === undefined ? {} : { body: row.body }),
    });
    const text = await res.text();
    expect(res.status, text).toBe(row.status);
    if (row.status >= 400) {
      const body = JSON.parse(text) as { error: { status: number; message: string } };
      expect(body.error.status).toBe(row.status);
      if (row.message !== undefined) expect(body.error.message).toMatch(row.message);
      expect(text).not.toContain('hunter2');
    }
    if (row.header !== undefined) expect(res.headers.get(row.header[0])).toBe(row.header[1]);
  });

  it('200: replies with a binary-mode CloudEvent of the declared type', async () => {
    const headers = ce('io.edgeai.test.echo', {
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    });
    const res = await fetch(server.url, {
      method: 'POST',
      headers,
      body: '{"count":1,"label":"a"}',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('ce-type')).toBe('io.edgeai.test.echoed');
    expect(res.headers.get('ce-source')).toBe('/apis/edgeai.io/functions/answers');
    expect(res.headers.get('ce-subject')).toBe(headers['ce-id']);
    expect(res.headers.get('ce-specversion')).toBe('1.0');
    expect(res.headers.get('ce-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ count: 2 });
    const trace = res.headers.get('traceparent') ?? '';
    expect(trace).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    expect(trace).not.toContain('b7ad6b7169203331');
  });

  it('200: structured mode with a charset parameter', async () => {
    const res = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'Application/CloudEvents+JSON; charset=UTF-8' },
      body: structured({ type: 'io.edgeai.test.echo', data: { count: 41, label: 'b' } }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ count: 42 });
  });

  it('413: a chunked body is cut off at the limit, and the server keeps serving', async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(server.url, { method: 'POST', headers: ce('io.edgeai.test.accept') });
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      const chunk = 'x'.repeat(1024);
      for (let i = 0; i < 64; i++) req.write(chunk);
      req.end();
    });
    expect(status).toBe(413);
    const after = await fetch(`${server.url}/health/liveness`);
    expect(after.status).toBe(200);
  });

  it('starts a new trace when the caller sends none or a malformed one', async () => {
    for (const traceparent of [
      undefined,
      'garbage',
      '00-00000000000000000000000000000000-b7ad6b7169203331-01',
    ]) {
      const headers = ce('io.edgeai.test.accept', traceparent === undefined ? {} : { traceparent });
      const res = await fetch(server.url, { method: 'POST', headers, body: '{}' });
      expect(res.headers.get('traceparent')).toMatch(/^00-(?!0{32})[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    }
  });

  it('liveness always, readiness only while every dependency is up', async () => {
    expect((await fetch(`${server.url}/health/liveness`)).status).toBe(200);
    const up = await fetch(`${server.url}/health/readiness`);
    expect(up.status).toBe(200);
    expect(await up.json()).toEqual({ status: 'ready', checks: { flag: 'ok' } });
    ready = false;
    const down = await fetch(`${server.url}/health/readiness`);
    ready = true;
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({ status: 'unavailable', checks: { flag: 'flag is down' } });
  });

  it('exports request counts and latencies by kind and status', async () => {
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(
      /edgeai_requests_total\{kind="io.edgeai.test.echo",status="200",function="answers"\} \d+/,
    );
    expect(text).toMatch(
      /edgeai_requests_total\{kind="POST \/items\/:name",status="201",function="answers"\} 1/,
    );
    expect(text).toMatch(
      /edgeai_request_duration_seconds_bucket\{le="0.005",function="answers",kind="io.edgeai.test.accept"\} \d+/,
    );
  });

  it('logs one line per request with the event id, type and status, and bugs with their stack', async () => {
    const headers = ce('io.edgeai.test.accept');
    await fetch(server.url, { method: 'POST', headers, body: '{}' });
    const lines = telemetry.lines.filter((line) => line['ceId'] === headers['ce-id']);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      fn: 'answers',
      ceType: 'io.edgeai.test.accept',
      status: 202,
      msg: 'request',
    });
    expect(lines[0]?.['traceId']).toMatch(/^[0-9a-f]{32}$/);
    const bug = telemetry.lines.find((line) => line['ceType'] === 'io.edgeai.test.bug');
    expect(bug).toMatchObject({ level: 50, status: 500, msg: 'request failed' });
    expect(JSON.stringify(bug)).toContain('leaked from internals');
  });
});

describe('defineFunction', () => {
  it('refuses a function that would reply a type it consumes (a Broker loop)', () => {
    expect(() =>
      defineFunction({
        name: 'looper',
        events: [
          onEvent({
            type: 'a',
            data: z.unknown(),
            replies: ['b'],
            handle: async () => ({ kind: 'accepted' }),
          }),
          onEvent({ type: 'b', data: z.unknown(), handle: async () => ({ kind: 'accepted' }) }),
        ],
      }),
    ).toThrow(/looper would reply b, a type it consumes/);
  });
});
