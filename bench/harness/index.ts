/**
 * bench/harness: what shared/http and shared/redis cost over their bare foundations, measured
 * side by side in one run (rounds interleaved, medians reported, so machine noise hits both).
 *  (a) bare functions-framework HTTP hello vs (b) a shared/http function decoding a 3 KB binary
 *      CloudEvent, validating it and replying with an event; same request, same load generator.
 *  (c) raw ioredis EVALSHA of a one-key script vs (d) the same effect through
 *      defineIdempotentScript (dedupe marker + effect in one script), 64 commands in flight.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
// The baseline is ioredis itself, so this benchmark imports it beside the adapter.
import { Redis } from 'ioredis';
import { startRedisServer } from '../../local/index.js';
import {
  createRedis,
  defineIdempotentScript,
  hashTag,
  key,
  waitReady,
} from '../../shared/redis/index.js';
import { finish, median, printTable } from '../support/report.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 8);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 3);
const connections = 32;
const redisOps = Number(process.env['BENCH_REDIS_OPS'] ?? 25_000);
// Short paired rounds: the ratio of each back-to-back pair is robust to the machine's drift.
const redisRounds = 20;
const inFlight = 64;

interface HttpFigures {
  rps: number;
  p50: number;
  p99: number;
}

function benchEvent(): { headers: Record<string, string>; body: string } {
  const samples: number[] = [];
  let body = '';
  for (let i = 0; body.length < 3072; i++) {
    samples.push(Math.round(Math.sin(i) * 1e6) / 1e6);
    body = JSON.stringify({ node: 'edge-node-1', samples });
  }
  return {
    headers: {
      'ce-specversion': '1.0',
      'ce-id': 'bench-1',
      'ce-source': '/bench/harness',
      'ce-type': 'io.edgeai.bench.requested',
      'content-type': 'application/json',
    },
    body,
  };
}

async function startChild(mode: 'hello' | 'edgeai') {
  const child = fork(new URL('./server.js', import.meta.url), [mode], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const [message] = (await once(child, 'message')) as [{ port: number }];
  return {
    url: `http://127.0.0.1:${message.port}/`,
    async stop() {
      child.kill();
      await once(child, 'exit');
    },
  };
}

async function load(url: string, duration: number): Promise<HttpFigures> {
  const { headers, body } = benchEvent();
  const result = await autocannon({ url, method: 'POST', headers, body, connections, duration });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

/**
 * Rounds alternate ABBA (hello first in even rounds, last in odd ones) so drift and order effects
 * hit both servers alike; the ratio is the median of the per-round ratios.
 */
async function httpRounds(): Promise<Record<'hello' | 'edgeai', HttpFigures> & { ratio: number }> {
  const servers = { hello: await startChild('hello'), edgeai: await startChild('edgeai') };
  const samples: Record<'hello' | 'edgeai', HttpFigures[]> = { hello: [], edgeai: [] };
  try {
    // V8 keeps optimizing for several seconds: warm both up before the measured rounds.
    for (const mode of ['hello', 'edgeai'] as const) await load(servers[mode].url, 6);
    for (let round = 0; round < rounds; round++) {
      const order =
        round % 2 === 0 ? (['hello', 'edgeai'] as const) : (['edgeai', 'hello'] as const);
      for (const mode of order) samples[mode].push(await load(servers[mode].url, seconds));
    }
  } finally {
    await Promise.all([servers.hello.stop(), servers.edgeai.stop()]);
  }
  const summary = (list: HttpFigures[]): HttpFigures => ({
    rps: median(list.map((s) => s.rps)),
    p50: median(list.map((s) => s.p50)),
    p99: median(list.map((s) => s.p99)),
  });
  const ratios = samples.edgeai.map((s, i) => s.rps / samples.hello[i]!.rps);
  return { hello: summary(samples.hello), edgeai: summary(samples.edgeai), ratio: median(ratios) };
}

/** Runs `op` `total` times with `inFlight` outstanding; returns operations per second. */
async function pump(total: number, op: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < total) await op(next++);
    }),
  );
  return total / (Number(process.hrtime.bigint() - started) / 1e9);
}

async function measureRedis(): Promise<{ raw: number; idempotent: number; ratio: number }> {
  const server = process.env['REDIS_URL'] ? undefined : await startRedisServer();
  const url = process.env['REDIS_URL'] ?? server!.url;
  const prefix = `bench-${randomUUID()}:`;
  const lua = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
  const guarded = createRedis(
    { url, keyPrefix: prefix, commandTimeoutMs: 5000, connectTimeoutMs: 2000 },
    (err) => process.stderr.write(`redis: ${err.message}\n`),
  );
  const raw = new Redis(url, { keyPrefix: prefix });
  const counter = key('count', hashTag('bench'));
  try {
    await waitReady(guarded, 10_000);
    const add = defineIdempotentScript(guarded, 'benchAdd', { keys: 1, ttlSeconds: 60, lua });
    const sha = (await raw.script('LOAD', lua)) as string;
    let id = 0;
    const run = String(Date.now());
    const rawOp = () => raw.evalsha(sha, 1, counter, 1);
    const idempotentOp = () =>
      add({ source: '/bench', id: `${run}-${id++}`, tag: 'bench' }, [counter], [1]);
    await pump(20_000, rawOp); // warm-up both paths
    await pump(20_000, idempotentOp);
    const samples = { raw: [] as number[], idempotent: [] as number[] };
    for (let round = 0; round < redisRounds; round++) {
      if (round % 2 === 0) {
        samples.raw.push(await pump(redisOps, rawOp));
        samples.idempotent.push(await pump(redisOps, idempotentOp));
      } else {
        samples.idempotent.push(await pump(redisOps, idempotentOp));
        samples.raw.push(await pump(redisOps, rawOp));
      }
    }
    const ratios = samples.idempotent.map((v, i) => v / samples.raw[i]!);
    return {
      raw: median(samples.raw),
      idempotent: median(samples.idempotent),
      ratio: median(ratios),
    };
  } finally {
    await guarded.del(counter).catch(() => undefined);
    guarded.disconnect();
    raw.disconnect();
    await server?.stop();
  }
}

export async function main(): Promise<void> {
  process.stdout.write(
    `bench/harness: ${rounds} interleaved rounds of ${seconds}s, ${connections} connections; Redis ${redisOps} ops x ${redisRounds}, ${inFlight} in flight\n`,
  );
  const http = await httpRounds();
  printTable(
    'HTTP (POST of a 3 KB binary CloudEvent, medians)',
    ['server', 'requests/s', 'p50 ms', 'p99 ms'],
    [
      ['(a) functions-framework hello', Math.round(http.hello.rps), http.hello.p50, http.hello.p99],
      [
        '(b) shared/http event + reply',
        Math.round(http.edgeai.rps),
        http.edgeai.p50,
        http.edgeai.p99,
      ],
    ],
  );
  const redis = await measureRedis();
  printTable(
    'Redis (one-key INCRBY script, medians)',
    ['client', 'ops/s'],
    [
      ['(c) raw ioredis EVALSHA', Math.round(redis.raw)],
      ['(d) idempotency-checked write', Math.round(redis.idempotent)],
    ],
  );
  const httpRatio = http.ratio;
  const redisRatio = redis.ratio;
  finish(
    'harness',
    {
      hello_rps: Math.round(http.hello.rps),
      hello_p50_ms: http.hello.p50,
      hello_p99_ms: http.hello.p99,
      shared_http_rps: Math.round(http.edgeai.rps),
      shared_http_p50_ms: http.edgeai.p50,
      shared_http_p99_ms: http.edgeai.p99,
      http_ratio: Math.round(httpRatio * 1000) / 1000,
      redis_raw_ops: Math.round(redis.raw),
      redis_idempotent_ops: Math.round(redis.idempotent),
      redis_ratio: Math.round(redisRatio * 1000) / 1000,
    },
    {
      http_ratio: { value: Math.round(httpRatio * 1000) / 1000, op: '>=', target: 0.85 },
      redis_ratio: { value: Math.round(redisRatio * 1000) / 1000, op: '>=', target: 0.8 },
    },
  );
}
