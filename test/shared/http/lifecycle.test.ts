/**
 * serveFunction owns the end of a function's process, tested here with a fake process (its
 * signals and crash events emitted by the test, its exit recorded) and real HTTP: SIGTERM
 * drains (readiness 503, no new connection, the request in flight completes with `Connection:
 * close`), releases the function and exits 0; an uncaught exception or an unhandled rejection
 * is logged with the trace ids in flight and exits 1 after the same drain; a drain that does not
 * end in time cuts what is left and exits 1. test/e2e/crash-only.test.ts does the same to a real
 * process.
 */
import { EventEmitter, once } from 'node:events';
import { createServer } from 'node:net';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { defineFunction, onRequest, serveFunction } from '../../../shared/http/index.js';
import { capturedTelemetry } from '../../support/http.js';
import { signal } from '../../support/signal.js';

/** A process whose events the test emits and whose exit it records. */
function fakeProcess() {
  const exited = signal();
  const codes: number[] = [];
  const proc = Object.assign(new EventEmitter(), {
    exitCode: undefined as number | string | undefined | null,
    exit(code: number) {
      codes.push(code);
      exited.changed();
    },
  });
  return { proc, codes, exit: () => exited.when(() => codes.length > 0).then(() => codes[0]) };
}

/** A function with one route that answers when the test releases it. */
function holdingFunction() {
  const waiting: Array<() => void> = [];
  const held = signal();
  const definition = defineFunction({
    name: 'lifecycle',
    routes: [
      onRequest({
        method: 'GET',
        path: '/hold',
        handle: () =>
          new Promise((resolve) => {
            waiting.push(() => resolve({ kind: 'json', body: { held: true } }));
            held.changed();
          }),
      }),
    ],
  });
  return {
    definition,
    /** Resolves once `n` requests are held. */
    held: (n: number) => held.when(() => waiting.length >= n),
    release: () => waiting.splice(0).forEach((resolve) => resolve()),
  };
}

const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

/** GET `path` on its own connection: status, Connection header and body, or the error. */
function get(port: number, path: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; connection: string | undefined; body: string }>(
    (resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }),
        );
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    },
  );
}

function start(drainTimeoutMs = 10_000) {
  const fake = fakeProcess();
  const fn = holdingFunction();
  const telemetry = capturedTelemetry('lifecycle');
  let closed = 0;
  const serving = serveFunction({
    definition: fn.definition,
    close: async () => {
      closed += 1;
    },
    telemetry,
    port: 0,
    host: '127.0.0.1',
    bodyLimitBytes: 1024,
    readinessTimeoutMs: 200,
    drainTimeoutMs,
    process: fake.proc,
  });
  return { ...fake, ...fn, telemetry, serving, closed: () => closed };
}

describe('serveFunction', () => {
  it('on SIGTERM drains: 503 ready, no new connections, the request in flight completes; exit 0', async () => {
    const t = start();
    const port = await t.serving.listening;
    expect((await get(port, '/health/readiness')).status).toBe(200);
    const inFlight = get(port, '/hold');
    inFlight.catch(() => undefined); // awaited below
    await t.held(1);
    // A request on its way in (head sent, body not yet) when the drain starts.
    const arriving = connect(port, '127.0.0.1');
    await once(arriving, 'connect');
    arriving.write('GET /health/readiness HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n');
    arriving.setEncoding('utf8');
    let readiness = '';
    arriving.on('data', (chunk: string) => (readiness += chunk));

    t.proc.emit('SIGTERM', 'SIGTERM');
    await expect(get(port, '/health/liveness')).rejects.toThrow(/ECONNREFUSED/);
    arriving.end('{}');
    await once(arriving, 'close');
    expect(readiness).toMatch(/^HTTP\/1.1 503 /);
    expect(readiness).toMatch(/connection: close/i);
    expect(readiness).toContain('"serving":"draining (SIGTERM)"');
    expect(t.codes).toEqual([]);

    t.release();
    expect(await inFlight).toMatchObject({
      status: 200,
      connection: 'close',
      body: '{"held":true}',
    });
    expect(await t.exit()).toBe(0);
    expect(t.closed()).toBe(1);
    expect(t.telemetry.lines).toContainEqual(
      expect.objectContaining({ msg: 'draining', reason: 'SIGTERM', inFlight: 1 }),
    );
  });

  it.each([
    ['uncaughtException', new Error('thrown from a timer'), 'uncaughtException'],
    ['unhandledRejection', new Error('rejected in a timer'), undefined],
  ] as const)(
    'on an %s logs the requests in flight, drains and exits 1',
    async (event, err, origin) => {
      const t = start();
      const port = await t.serving.listening;
      const inFlight = get(port, '/hold', { traceparent });
      inFlight.catch(() => undefined); // awaited below
      await t.held(1);
      if (origin === undefined)
        t.proc.emit(
          event,
          err,
          Promise.reject(err).catch(() => {}),
        );
      else t.proc.emit(event, err, origin);
      expect(t.proc.exitCode).toBe(1);
      await expect(get(port, '/health/liveness')).rejects.toThrow(/ECONNREFUSED/);
      const fatal = t.telemetry.lines.find((line) => line['level'] === 60);
      expect(fatal).toMatchObject({
        origin: event,
        inFlight: ['0af7651916cd43dd8448eb211c80319c'],
        msg: 'crashed: draining, then exiting 1',
      });
      expect(JSON.stringify(fatal?.['err'])).toContain(err.message);
      t.release();
      expect((await inFlight).status).toBe(200);
      expect(await t.exit()).toBe(1);
      expect(t.closed()).toBe(1);
    },
  );

  it('cuts what is still in flight when the drain runs out, and exits 1', async () => {
    const t = start(100);
    const port = await t.serving.listening;
    const inFlight = get(port, '/hold', { traceparent });
    inFlight.catch(() => undefined); // awaited below
    await t.held(1);
    t.proc.emit('SIGTERM', 'SIGTERM');
    expect(await t.exit()).toBe(1);
    await expect(inFlight).rejects.toThrow(/socket hang up|ECONNRESET/);
    expect(t.telemetry.lines).toContainEqual(
      expect.objectContaining({
        msg: 'drain timed out',
        inFlight: ['0af7651916cd43dd8448eb211c80319c'],
      }),
    );
    t.release();
  });

  it('exits 1 when it cannot listen', async () => {
    const taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const fake = fakeProcess();
    const telemetry = capturedTelemetry('lifecycle');
    const serving = serveFunction({
      definition: holdingFunction().definition,
      close: async () => {},
      telemetry,
      port: (taken.address() as { port: number }).port,
      host: '127.0.0.1',
      bodyLimitBytes: 1024,
      readinessTimeoutMs: 200,
      drainTimeoutMs: 1000,
      process: fake.proc,
    });
    await expect(serving.listening).rejects.toThrow(/EADDRINUSE/);
    expect(await fake.exit()).toBe(1);
    taken.close();
  });
});
