/**
 * bench/edge-infer: the edge worker over HTTP, run as the container runs it (the esbuild bundle,
 * `node dist/bundle/serve.mjs`), next to two ceilings measured in the same run (rounds
 * interleaved in a rotating order, medians of per-round ratios): a bare `node:http` hello and a
 * bare functions-framework hello. Batch 1 as OIP JSON; batch 64 with the OIP binary tensor
 * extension both ways (and binary in / JSON out, and all JSON, for comparison); small requests'
 * p99 alone and while large batches run (a pair per round, back to back; the median of the
 * rounds' ratios); process start to first prediction, for the bundle and for the plain tsc
 * build. Targets: batch-1 requests/s >= 1.5x the functions-framework hello's; batch-64
 * samples/s >= 30x the hello's requests/s; small p99 under large load <= 2x alone; start <= 500
 * ms. With `--chaos`, the load run with inference threads stopped every 5 s instead (chaos.ts).
 */
import { fork, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { inferenceNodeOptions } from '../../shared/messages/worker-env.js';
import { freePort } from '../../local/index.js';
import { loadMnist, pixels } from '../../shared/training/data.js';
import { finish, median, printTable } from '../support/report.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 4);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 3);
const connections = 32;
const root = new URL('../../../', import.meta.url);
const entries = {
  bundle: fileURLToPath(new URL('dist/bundle/serve.mjs', root)),
  tsc: fileURLToPath(new URL('dist/bin/serve.js', root)),
};

interface Figures {
  rps: number;
  p50: number;
  p99: number;
}

interface Request {
  method: 'POST';
  headers: Record<string, string>;
  body: string | Buffer;
}

function edgeEnv(port: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    FUNCTION_TARGET: 'edge-infer',
    PORT: String(port),
    // As reconcile-tick deploys the worker.
    NODE_OPTIONS: inferenceNodeOptions,
    MODEL_URL: new URL('models/edge.onnx', root).href,
    MODEL_ROOT: fileURLToPath(new URL('models/', root)),
    HEM_NAME: 'EdgeOnly',
    MAX_BATCH: '256',
    BODY_LIMIT_BYTES: String(4 << 20),
    // Logging stays on (info, one line per request), as in production.
    LOG_LEVEL: 'info',
  };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGINT');
  await once(child, 'exit');
}

/** A hello server (server.ts: `node` or `ff`), in a child process like the edge worker. */
async function startHello(mode: 'node' | 'ff') {
  const child = fork(new URL('./server.js', import.meta.url), [mode], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const [message] = (await once(child, 'message')) as [{ port: number }];
  return { base: `http://127.0.0.1:${message.port}`, stop: () => stopChild(child) };
}

/**
 * The edge worker from `entry`, polled every 5 ms with `request` until it answers: the time
 * from spawn to that answer is the start-up figure.
 */
async function startEdge(entry: string, request: Request) {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(process.execPath, [entry], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: edgeEnv(port),
  });
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${entry} exited with ${child.exitCode}`);
    const answer = await fetch(`${base}/v2/models/edge/infer`, request).catch(() => undefined);
    if (answer !== undefined) {
      await answer.arrayBuffer();
      if (answer.status !== 200) throw new Error(`first prediction answered ${answer.status}`);
      return { base, startMs: performance.now() - started, stop: () => stopChild(child) };
    }
    await sleep(5);
  }
}

function requests() {
  const { test } = loadMnist();
  const json = { 'content-type': 'application/json' };
  const jsonRequest = (rows: number): Request => ({
    method: 'POST',
    headers: json,
    body: JSON.stringify({
      inputs: [
        {
          name: 'input',
          shape: [rows, 784],
          datatype: 'FP32',
          data: Array.from(test.x.subarray(0, rows * pixels)),
        },
      ],
    }),
  });
  const binaryRequest = (rows: number, binaryOutput: boolean): Request => {
    const header = Buffer.from(
      JSON.stringify({
        ...(binaryOutput ? { parameters: { binary_data_output: true } } : {}),
        inputs: [
          {
            name: 'input',
            shape: [rows, 784],
            datatype: 'FP32',
            data: [],
            parameters: { binary_data_size: rows * pixels * 4 },
          },
        ],
      }),
    );
    const data = test.x.slice(0, rows * pixels);
    return {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(header.length),
      },
      body: Buffer.concat([header, Buffer.from(data.buffer)]),
    };
  };
  return {
    one: jsonRequest(1),
    json64: jsonRequest(64),
    binary64: binaryRequest(64, true),
    binaryIn64: binaryRequest(64, false),
  };
}

async function load(
  url: string,
  request: Request,
  duration: number,
  conns = connections,
): Promise<Figures> {
  const result = await autocannon({ url, ...request, connections: conns, duration });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  }
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

/**
 * `load`, with percentiles from each response's own time: autocannon's histogram keeps whole
 * milliseconds, too coarse for a 2x comparison of few-millisecond tails (one millisecond of
 * rounding moves the ratio by a quarter), while its 'response' events carry the time to a
 * fraction of a millisecond. Same client, same load, finer figures.
 */
async function timedLoad(
  url: string,
  request: Request,
  duration: number,
  conns: number,
): Promise<Figures> {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const job = autocannon({ url, ...request, connections: conns, duration }, (err, done) =>
      err === null || err === undefined ? resolve(done) : reject(err as Error),
    );
    job.on('response', (_client, status, _bytes, ms) => {
      if (status === 200) latencies.push(ms);
    });
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  }
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Number(latencies[Math.floor(q * (latencies.length - 1))]!.toFixed(2));
  return { rps: result.requests.average, p50: at(0.5), p99: at(0.99) };
}

const summary = (list: Figures[]): Figures => ({
  rps: median(list.map((s) => s.rps)),
  p50: median(list.map((s) => s.p50)),
  p99: median(list.map((s) => s.p99)),
});

/** Spawn to first prediction, alternating the two builds (the model loads each time). */
async function startups(request: Request, times: number) {
  const out = { bundle: [] as number[], tsc: [] as number[] };
  for (let i = 0; i < times; i += 1) {
    for (const build of ['bundle', 'tsc'] as const) {
      const edge = await startEdge(entries[build], request);
      out[build].push(edge.startMs);
      await edge.stop();
    }
  }
  return out;
}

type Sampled = 'node' | 'ff' | 'one' | 'json64' | 'binary64' | 'binaryIn64';

interface Measured {
  samples: Record<Sampled, Figures[]>;
  /**
   * Small requests at low concurrency, alone and beside a stream of large batches: one pair per
   * round, each pair back to back, so that the two halves of a ratio see the same machine.
   */
  tail: Array<{ alone: Figures; mixed: Figures; large: Figures }>;
}

/**
 * Every order of the two ceilings and batch 1: round r runs orders[r % 6], so each pair meets
 * both ways; batch 64 follows, in the same round as the ceilings it is divided by.
 */
const orders: ReadonlyArray<ReadonlyArray<'node' | 'ff' | 'one'>> = [
  ['node', 'ff', 'one'],
  ['one', 'ff', 'node'],
  ['ff', 'one', 'node'],
  ['node', 'one', 'ff'],
  ['one', 'node', 'ff'],
  ['ff', 'node', 'one'],
];

/** The interleaved rounds against the hellos and the edge worker, then the small-request tail. */
async function measureHttp(req: ReturnType<typeof requests>): Promise<Measured> {
  const hellos = { node: await startHello('node'), ff: await startHello('ff') };
  // A worker that fails to start must not leave the hellos (and this process) running.
  const edge = await startEdge(entries.bundle, req.one).catch(async (err: unknown) => {
    await Promise.all([hellos.node.stop(), hellos.ff.stop()]);
    throw err;
  });
  const infer = `${edge.base}/v2/models/edge/infer`;
  const urls = { node: `${hellos.node.base}/`, ff: `${hellos.ff.base}/`, one: infer };
  const samples: Measured['samples'] = {
    node: [],
    ff: [],
    one: [],
    json64: [],
    binary64: [],
    binaryIn64: [],
  };
  try {
    // V8 keeps optimizing for seconds: every server warms up before the measured rounds.
    for (const url of Object.values(urls)) await load(url, req.one, 4);
    await load(infer, req.binary64, 3);
    for (let round = 0; round < rounds; round += 1) {
      for (const name of orders[round % orders.length]!) {
        samples[name].push(await load(urls[name], req.one, seconds));
      }
      samples.binary64.push(await load(infer, req.binary64, seconds));
      samples.binaryIn64.push(await load(infer, req.binaryIn64, seconds));
      samples.json64.push(await load(infer, req.json64, seconds));
    }
    const tail: Measured['tail'] = [];
    for (let round = 0; round < rounds; round += 1) {
      const alone = await timedLoad(infer, req.one, seconds, 4);
      const [mixed, large] = await Promise.all([
        timedLoad(infer, req.one, seconds, 4),
        load(infer, req.binary64, seconds, 8),
      ]);
      tail.push({ alone, mixed, large });
    }
    return { samples, tail };
  } finally {
    await Promise.all([hellos.node.stop(), hellos.ff.stop(), edge.stop()]);
  }
}

function printHttp({ samples, tail }: Measured): void {
  const node = summary(samples.node);
  const ff = summary(samples.ff);
  const one = summary(samples.one);
  const rows64 = (label: string, f: Figures) => [
    label,
    Math.round(f.rps),
    Math.round(f.rps * 64),
    f.p50,
    f.p99,
  ];
  printTable(
    'HTTP, medians of the rounds',
    ['request', 'requests/s', 'samples/s', 'p50 ms', 'p99 ms'],
    [
      [
        'hello (bare node:http), same body as batch 1',
        Math.round(node.rps),
        '',
        node.p50,
        node.p99,
      ],
      ['hello (functions-framework), same body as batch 1', Math.round(ff.rps), '', ff.p50, ff.p99],
      ['edge-infer batch 1 (OIP JSON)', Math.round(one.rps), Math.round(one.rps), one.p50, one.p99],
      rows64('edge-infer batch 64 (OIP binary in and out)', summary(samples.binary64)),
      rows64('edge-infer batch 64 (OIP binary in, JSON out)', summary(samples.binaryIn64)),
      rows64('edge-infer batch 64 (OIP JSON)', summary(samples.json64)),
    ],
  );
  printTable(
    'small requests (batch 1, 4 connections; percentiles of every response time, to 0.01 ms), alone and beside batch-64 binary requests (8 connections), back to back in each round',
    [
      'round',
      'alone req/s',
      'alone p50 ms',
      'alone p99 ms',
      'beside req/s',
      'beside p50 ms',
      'beside p99 ms',
      'p99 ratio',
      'batch 64 beside, samples/s',
    ],
    tail.map(({ alone, mixed, large }, i) => [
      i + 1,
      Math.round(alone.rps),
      alone.p50,
      alone.p99,
      Math.round(mixed.rps),
      mixed.p50,
      mixed.p99,
      Number((mixed.p99 / alone.p99).toFixed(2)),
      Math.round(large.rps * 64),
    ]),
  );
}

/** The median over rounds of `of(round)`. */
function perRound(samples: Measured['samples'], of: (i: number) => number): number {
  return Number(median(samples.one.map((_, i) => of(i))).toFixed(3));
}

function report({ samples, tail }: Measured, starts: Record<'bundle' | 'tsc', number[]>) {
  const one = summary(samples.one);
  const rps = (name: Sampled, i: number) => samples[name][i]!.rps;
  const batch1VsFf = perRound(samples, (i) => rps('one', i) / rps('ff', i));
  const batch1VsNode = perRound(samples, (i) => rps('one', i) / rps('node', i));
  // Samples/s of batch 64 (binary both ways) over the hello's requests/s, same round.
  const batch64VsFf = perRound(samples, (i) => (rps('binary64', i) * 64) / rps('ff', i));
  const batch64VsNode = perRound(samples, (i) => (rps('binary64', i) * 64) / rps('node', i));
  const samplesPerSecond = Math.round(summary(samples.binary64).rps * 64);
  // The median of the rounds' ratios, as for the throughput figures.
  const p99Ratio = Number(median(tail.map((t) => t.mixed.p99 / t.alone.p99)).toFixed(2));
  const alone = summary(tail.map((t) => t.alone));
  const mixed = summary(tail.map((t) => t.mixed));
  const startMs = Math.round(median(starts.bundle));
  finish(
    'edge-infer',
    {
      node_hello_rps: Math.round(summary(samples.node).rps),
      ff_hello_rps: Math.round(summary(samples.ff).rps),
      batch1_rps: Math.round(one.rps),
      batch1_p50_ms: one.p50,
      batch1_p99_ms: one.p99,
      edge_batch1_vs_ff_hello: batch1VsFf,
      edge_batch1_vs_node_hello: batch1VsNode,
      batch64_binary_samples_per_s: samplesPerSecond,
      batch64_vs_ff_hello: batch64VsFf,
      batch64_vs_node_hello: batch64VsNode,
      batch64_binary_in_json_out_samples_per_s: Math.round(summary(samples.binaryIn64).rps * 64),
      batch64_json_samples_per_s: Math.round(summary(samples.json64).rps * 64),
      small_p99_alone_ms: Number(alone.p99.toFixed(2)),
      small_p99_mixed_ms: Number(mixed.p99.toFixed(2)),
      small_p99_ratio: p99Ratio,
      batch64_beside_small_samples_per_s: Math.round(summary(tail.map((t) => t.large)).rps * 64),
      start_to_first_prediction_ms: startMs,
      start_to_first_prediction_tsc_build_ms: Math.round(median(starts.tsc)),
    },
    {
      edge_batch1_vs_ff_hello: { value: batch1VsFf, op: '>=', target: 1.5 },
      batch64_vs_ff_hello: { value: batch64VsFf, op: '>=', target: 30 },
      small_p99_ratio: { value: p99Ratio, op: '<=', target: 2 },
      start_to_first_prediction_ms: { value: startMs, op: '<=', target: 500 },
    },
  );
}

export { edgeEnv, entries, requests };

export async function main(args: string[] = []): Promise<void> {
  if (args.includes('--chaos')) {
    await (await import('./chaos.js')).chaos();
    return;
  }
  const req = requests();
  process.stdout.write(
    `bench/edge-infer: ${rounds} interleaved rounds of ${seconds}s, ${connections} connections\n`,
  );
  const measured = await measureHttp(req);
  const starts = await startups(req.one, 3);
  printHttp(measured);
  printTable(
    'process start to first prediction (ms)',
    ['run', 'bundle (the image: node dist/bundle/serve.mjs)', 'tsc build (node dist/bin/serve.js)'],
    starts.bundle.map((ms, i) => [i + 1, Math.round(ms), Math.round(starts.tsc[i]!)]),
  );
  report(measured, starts);
}
