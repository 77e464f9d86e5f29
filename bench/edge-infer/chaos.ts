/**
 * `npm run bench -- edge-infer --chaos`: the edge worker from the bundle, as the image runs it,
 * under 60 s of load at 64 connections from autocannon (56 sending batch-1 OIP JSON, 8 sending
 * batch-64 OIP binary) while one of its two inference threads is stopped every 5 s
 * (`POOL_CHAOS_STOP_MS=5000`: terminated at the first moment it is outside onnxruntime, as a
 * terminate from outside would be). It prints the answers by status, the socket errors, the
 * longest wait, the threads the worker logged as died and replaced, and its resident memory
 * before and after. Targets: nothing but 200 and the retryable 503, no socket error, no wait past
 * the pool's deadline (5 s) by more than a second.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';
import { freePort } from '../../local/index.js';
import { finish, printTable } from '../support/report.js';
import { edgeEnv, entries, requests } from './index.js';

const seconds = Number(process.env['CHAOS_SECONDS'] ?? 60);
const stopEveryMs = 5000;
const deadlineMs = 5000;

/** The process's resident memory, in MB (/proc). */
function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return Math.round(kb / 102.4) / 10;
}

/** autocannon at `connections`, answers tallied by status and the longest response time kept. */
async function hammer(
  url: string,
  request: ReturnType<typeof requests>['one'],
  connections: number,
) {
  const statuses = new Map<number, number>();
  let longestMs = 0;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const job = autocannon(
      // A timeout past any wait the worker allows: a request that hangs shows as the longest wait.
      { url, ...request, connections, duration: seconds, timeout: 30 },
      (err, done) => (err === null || err === undefined ? resolve(done) : reject(err as Error)),
    );
    job.on('response', (_client, status, _bytes, ms) => {
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      longestMs = Math.max(longestMs, ms);
    });
  });
  return { statuses, longestMs, errors: result.errors, timeouts: result.timeouts };
}

/** The worker from the bundle with the chaos settings, once it answers; its thread events counted. */
async function startWorker(req: ReturnType<typeof requests>) {
  const port = await freePort();
  const child = spawn(process.execPath, [entries.bundle], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...edgeEnv(port),
      INFERENCE_THREADS: '2',
      POOL_CHAOS_STOP_MS: String(stopEveryMs),
      POOL_DEADLINE_MS: String(deadlineMs),
    },
  });
  const events = { died: 0, replaced: 0, startFailed: 0 };
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line.includes('"inference thread died"')) events.died += 1;
    else if (line.includes('"inference thread replaced"')) events.replaced += 1;
    else if (line.includes('"inference thread start-failed"')) events.startFailed += 1;
  });
  const base = `http://127.0.0.1:${port}`;
  const url = `${base}/v2/models/edge/infer`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the worker exited with ${child.exitCode}`);
    const answer = await fetch(url, req.one).catch(() => undefined);
    if (answer?.status === 200) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  if (child.pid === undefined) throw new Error('the worker has no pid');
  return { child, pid: child.pid, base, url, events };
}

type Tally = Awaited<ReturnType<typeof hammer>>;

/** The tables and the final JSON line. */
function report(
  small: Tally,
  large: Tally,
  worker: { events: Awaited<ReturnType<typeof startWorker>>['events']; readiness: number },
  rss: { before: number; samples: number[]; after: number },
  code: number | null,
): void {
  const statuses = [...new Set([...small.statuses.keys(), ...large.statuses.keys()])].sort();
  const count = (s: Map<number, number>, status: number) => s.get(status) ?? 0;
  const all = (status: number) => count(small.statuses, status) + count(large.statuses, status);
  printTable(
    'answers by status',
    ['status', 'batch 1', 'batch 64', 'all'],
    statuses.map((status) => [
      status,
      count(small.statuses, status),
      count(large.statuses, status),
      all(status),
    ]),
  );
  const longestMs = Math.round(Math.max(small.longestMs, large.longestMs));
  const socketErrors = small.errors + large.errors;
  const other = statuses
    .filter((status) => status !== 200 && status !== 503)
    .reduce((n, status) => n + all(status), 0);
  const { events } = worker;
  printTable(
    'the run',
    ['figure', 'value'],
    [
      ['socket errors (batch 1 / batch 64)', `${small.errors} / ${large.errors}`],
      ['timeouts (30 s)', small.timeouts + large.timeouts],
      [
        'longest wait, ms (batch 1 / batch 64)',
        `${Math.round(small.longestMs)} / ${Math.round(large.longestMs)}`,
      ],
      [
        'threads died / replaced / failed to start (the log)',
        `${events.died} / ${events.replaced} / ${events.startFailed}`,
      ],
      ['RSS before / after, MB', `${rss.before} / ${rss.after}`],
      ['RSS every 10 s of the run, MB', rss.samples.join(', ')],
      ['readiness after the run', worker.readiness],
      ['exit code after SIGTERM', String(code)],
    ],
  );
  finish(
    'edge-infer-chaos',
    {
      answered_200: all(200),
      answered_503: all(503),
      answered_other: other,
      socket_errors: socketErrors,
      longest_wait_ms: longestMs,
      threads_died: events.died,
      threads_replaced: events.replaced,
      rss_before_mb: rss.before,
      rss_after_mb: rss.after,
    },
    {
      answered_other: { value: other, op: '<=', target: 0 },
      socket_errors: { value: socketErrors, op: '<=', target: 0 },
      longest_wait_ms: { value: longestMs, op: '<=', target: deadlineMs + 1000 },
    },
  );
}

export async function chaos(): Promise<void> {
  const req = requests();
  const { child, pid, base, url, events } = await startWorker(req);
  const before = rssMb(pid);
  process.stdout.write(
    `bench/edge-infer --chaos: ${seconds} s, 64 connections (56 batch-1 JSON, 8 batch-64 binary), one of 2 inference threads stopped every ${stopEveryMs / 1000} s\n`,
  );
  // Resident memory every 10 s of the run: a plateau is the heap and arenas warming up, a rise
  // to the end would be a leak (each stopped thread's memory not given back).
  const samples: number[] = [];
  const sampler = setInterval(() => samples.push(rssMb(pid)), 10_000);
  const [small, large] = await Promise.all([
    hammer(url, req.one, 56),
    hammer(url, req.binary64, 8),
  ]).finally(() => clearInterval(sampler));
  const after = rssMb(pid);
  const ready = await fetch(`${base}/health/readiness`);
  await ready.arrayBuffer();
  child.kill('SIGTERM');
  const [code] = (await once(child, 'exit')) as [number | null];
  report(small, large, { events, readiness: ready.status }, { before, samples, after }, code);
}
