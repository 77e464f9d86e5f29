/**
 * The handler never throws, whatever goes wrong while it answers, over real HTTP: an answer that
 * does not serialize, carries a header Node refuses or a body of the wrong type is a clean 500;
 * a client gone before or during the answer is logged. Each is logged with the request's trace id, nothing escapes as an exception or an
 * unhandled rejection (vitest fails a run that has one), and the server keeps serving.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer, defineFunction, onRequest } from '../../../shared/http/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { signal } from '../../support/signal.js';

const telemetry = capturedTelemetry('write-failures');
const lines = signal();
const holding: Array<() => void> = [];
const held = signal();

let traces = 0;
/** A fresh traceparent, so a test finds its own request's log lines. */
const trace = () => `00-${(++traces).toString(16).padStart(32, 'a')}-b7ad6b7169203331-01`;
const traceId = (traceparent: string) => traceparent.split('-')[1];

const definition = defineFunction({
  name: 'write-failures',
  routes: [
    onRequest({
      method: 'GET',
      path: '/bigint',
      handle: async () => ({ kind: 'json', body: { n: 10n } }),
    }),
    onRequest({
      method: 'GET',
      path: '/bad-header',
      handle: async () => ({ kind: 'json', body: {}, headers: { 'x-note': 'two\nlines' } }),
    }),
    onRequest({
      method: 'GET',
      path: '/not-bytes',
      // What a handler in plain JavaScript could return.
      handle: async () => ({
        kind: 'bytes',
        contentType: 'application/octet-stream',
        body: 42 as unknown as Uint8Array,
      }),
    }),
    onRequest({
      method: 'GET',
      path: '/big',
      handle: async () => ({
        kind: 'bytes',
        contentType: 'application/octet-stream',
        body: new Uint8Array(64 << 20),
      }),
    }),
    onRequest({
      method: 'GET',
      path: '/hold',
      handle: () =>
        new Promise((resolve) => {
          holding.push(() => resolve({ kind: 'json', body: { held: true } }));
          held.changed();
        }),
    }),
  ],
});

/** Resolves with the first log line `match` accepts, logged now or later. */
async function logged(match: (line: Record<string, unknown>) => boolean) {
  await lines.when(() => telemetry.lines.some(match));
  return telemetry.lines.find(match)!;
}

describe('shared/http: failures while answering', () => {
  const http = buildServer(definition, {
    telemetry,
    bodyLimitBytes: 1024,
    readinessTimeoutMs: 200,
  });
  const connections = () =>
    new Promise<number>((resolve, reject) =>
      http.getConnections((err, count) => (err ? reject(err) : resolve(count))),
    );
  let server: Listening;
  // The captured lines arrive through a stream: look again every 5 ms (the test's timeout bounds it).
  const poll = setInterval(() => lines.changed(), 5);
  beforeAll(async () => {
    server = await listen(http);
  });
  afterAll(async () => {
    clearInterval(poll);
    await server.close();
  });

  const stillServes = async () => {
    const res = await fetch(`${server.url}/health/readiness`);
    expect(res.status).toBe(200);
  };

  it.each([
    ['an answer that does not serialize', '/bigint', /BigInt/],
    ['a header Node refuses', '/bad-header', /Invalid character in header content/],
    [
      'a body that is neither text nor bytes',
      '/not-bytes',
      /must be a string or bytes, not number/,
    ],
  ])('500 for %s, logged with the trace id', async (_name, path, message) => {
    const traceparent = trace();
    const res = await fetch(server.url + path, { headers: { traceparent } });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      error: { status: 500, reason: 'InternalError', message: 'internal error' },
    });
    expect(res.headers.get('traceparent')).toContain(traceId(traceparent));
    const line = await logged(
      (l) => l['msg'] === 'answer failed' && l['traceId'] === traceId(traceparent),
    );
    expect(JSON.stringify(line['err'])).toMatch(message);
    await stillServes();
  });

  it('logs a client gone before its answer (499), and keeps serving', async () => {
    const traceparent = trace();
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`GET /hold HTTP/1.1\r\nhost: x\r\ntraceparent: ${traceparent}\r\n\r\n`);
    await held.when(() => holding.length === 1);
    const before = await connections();
    socket.destroy();
    // The server has seen the connection close before the answer is ready.
    while ((await connections()) >= before) await new Promise((resolve) => setTimeout(resolve, 5));
    holding.shift()!();
    const line = await logged(
      (l) => l['msg'] === 'client gone before the answer' && l['traceId'] === traceId(traceparent),
    );
    expect(line).toMatchObject({ status: 499, path: '/hold', level: 40 });
    await stillServes();
  });

  it('logs a client gone in the middle of a large answer, and keeps serving', async () => {
    const traceparent = trace();
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(`${server.url}/big`, { headers: { traceparent } });
      req.on('response', (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
      req.end();
    });
    await logged(
      (l) =>
        l['msg'] === 'client gone before the whole answer was sent' &&
        l['traceId'] === traceId(traceparent),
    );
    await stillServes();
  });
});
