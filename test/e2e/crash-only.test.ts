/**
 * Crash-only serving, against a real process: a small function (fixtures/crashy-function.ts)
 * served by the routine every real function is served by (shared/http `serveFunction`, as
 * bin/serve.ts calls it). An answer that cannot be written (a clean 500) and a client gone
 * mid-answer are logged with their trace id and the process keeps serving; an unhandled
 * rejection or an uncaught exception from a timer is logged, readiness turns 503, the listener
 * closes, the request in flight completes, and the process exits 1; SIGTERM drains the same way
 * and exits 0.
 */
import { execFile, fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { signal } from '../support/signal.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const outDir = join(root, `.test-build-${randomUUID()}`);
const entry = join(outDir, 'crashy-function.mjs');

type Line = Record<string, unknown>;

interface Crashy {
  port: number;
  child: ChildProcess;
  lines: Line[];
  /** Resolves with the first log line `match` accepts, logged now or later. */
  logged(match: (line: Line) => boolean): Promise<Line>;
  /** Resolves once `n` requests wait in /hold. */
  held(n: number): Promise<void>;
  release(): void;
  exited: Promise<number | null>;
}

const children: ChildProcess[] = [];

async function start(): Promise<Crashy> {
  const child = fork(entry, [], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  children.push(child);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const lines: Line[] = [];
  const changed = signal();
  let rest = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    const parts = (rest + chunk).split('\n');
    rest = parts.pop() ?? '';
    for (const part of parts) if (part !== '') lines.push(JSON.parse(part) as Line);
    changed.changed();
  });
  let holding = 0;
  child.on('message', (message: { held?: number }) => {
    if (message.held !== undefined) holding = message.held;
    changed.changed();
  });
  const [{ port }] = (await once(child, 'message')) as [{ port: number }];
  return {
    port,
    child,
    lines,
    logged: async (match) => {
      await changed.when(() => lines.some(match));
      return lines.find(match)!;
    },
    held: (n) => changed.when(() => holding >= n),
    release: () => child.send('release'),
    exited,
  };
}

interface Answer {
  status: number;
  connection: string | undefined;
  body: string;
}

/** A request on its own connection: its answer, or the error if the connection failed. */
function call(port: number, method: string, path: string, headers: Record<string, string> = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false });
    req.on('response', (res) => {
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
  });
}

let traces = 0;
/** A fresh trace, so a test finds its own request in the log: [traceparent, trace id]. */
function trace(): [string, string] {
  const id = randomUUID().replaceAll('-', '').slice(0, 24) + String(++traces).padStart(8, '0');
  return [`00-${id}-b7ad6b7169203331-01`, id];
}

/**
 * A request on its way in when the process starts draining: its head sent, its body not yet.
 * `finish` sends the body and resolves with the raw answer once the server closes.
 */
async function arriving(port: number) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write('GET /health/readiness HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n');
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  const closed = once(socket, 'close');
  return {
    async finish() {
      socket.end('{}');
      await closed;
      return text;
    },
  };
}

describe('crash-only serving (a real process)', () => {
  beforeAll(async () => {
    await promisify(execFile)(
      'npx',
      [
        'esbuild',
        'test/e2e/fixtures/crashy-function.ts',
        '--bundle',
        '--platform=node',
        '--format=esm',
        '--target=node20',
        '--packages=external',
        `--outfile=${entry}`,
        '--log-level=warning',
      ],
      { cwd: root },
    );
  }, 60_000);
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
  });
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('an answer that cannot be written is a clean 500, and the process keeps serving', async () => {
    const fn = await start();
    const [traceparent, traceId] = trace();
    expect((await call(fn.port, 'GET', '/not-bytes', { traceparent })).status).toBe(500);
    const line = await fn.logged((l) => l['msg'] === 'answer failed' && l['traceId'] === traceId);
    expect(JSON.stringify(line['err'])).toContain('must be a string or bytes');
    expect((await call(fn.port, 'GET', '/health/readiness')).status).toBe(200);
    expect(fn.child.exitCode).toBeNull();
  });

  it('a client gone mid-answer is logged, and the process keeps serving', async () => {
    const fn = await start();
    const [traceparent, traceId] = trace();
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: fn.port,
        path: '/big',
        headers: { traceparent },
        agent: false,
      });
      req.on('response', (res) =>
        res.once('data', () => {
          req.destroy();
          resolve();
        }),
      );
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
      req.end();
    });
    await fn.logged(
      (l) =>
        l['msg'] === 'client gone before the whole answer was sent' && l['traceId'] === traceId,
    );
    expect((await call(fn.port, 'GET', '/health/readiness')).status).toBe(200);
    expect(fn.child.exitCode).toBeNull();
  });

  it('SIGTERM with a request in flight: it completes, then the process exits 0', async () => {
    const fn = await start();
    const held = call(fn.port, 'GET', '/hold');
    held.catch(() => undefined); // awaited below
    await fn.held(1);
    const late = await arriving(fn.port);
    fn.child.kill('SIGTERM');
    await fn.logged((l) => l['msg'] === 'draining');
    await expect(call(fn.port, 'GET', '/health/liveness')).rejects.toThrow(/ECONNREFUSED/);
    const readiness = await late.finish();
    expect(readiness).toMatch(/^HTTP\/1.1 503 /);
    expect(readiness).toContain('"serving":"draining (SIGTERM)"');
    fn.release();
    expect(await held).toMatchObject({ status: 200, connection: 'close', body: '{"held":true}' });
    expect(await fn.exited).toBe(0);
  });

  it.each([
    [
      'an unhandled rejection from a timer',
      '/reject-later',
      'unhandledRejection',
      /rejected in a timer/,
    ],
    [
      'an uncaught exception from a timer',
      '/throw-later',
      'uncaughtException',
      /thrown from a timer/,
    ],
  ])(
    '%s: logged with the trace ids in flight; 503 ready, no new connection, the request in flight completes; exit 1',
    async (_name, path, origin, message) => {
      const fn = await start();
      const [traceparent, traceId] = trace();
      const held = call(fn.port, 'GET', '/hold', { traceparent });
      held.catch(() => undefined); // awaited below
      await fn.held(1);
      const late = await arriving(fn.port);
      expect((await call(fn.port, 'POST', path)).status).toBe(202);
      const fatal = await fn.logged((l) => l['level'] === 60);
      expect(fatal).toMatchObject({ origin, inFlight: [traceId] });
      expect(JSON.stringify(fatal['err'])).toMatch(message);
      await expect(call(fn.port, 'GET', '/health/liveness')).rejects.toThrow(/ECONNREFUSED/);
      const readiness = await late.finish();
      expect(readiness).toMatch(/^HTTP\/1.1 503 /);
      expect(readiness).toContain(`"serving":"draining (crashed: ${origin})"`);
      expect(fn.child.exitCode).toBeNull();
      fn.release();
      expect(await held).toMatchObject({ status: 200, body: '{"held":true}' });
      expect(await fn.exited).toBe(1);
    },
  );
});
