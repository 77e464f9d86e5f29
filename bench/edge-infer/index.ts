/**
 * bench/edge-infer: the edge worker over HTTP, run as the container runs it (the esbuild bundle,
 * `node dist/bundle/serve.mjs`), next to a bare functions-framework hello measured in the same
 * run (rounds interleaved, medians). Batch 1 as OIP JSON; batch 64 with the OIP binary tensor
 * extension both ways (and binary in / JSON out, and all JSON, for comparison); small requests'
 * p99 alone and while large batches run; process start to first prediction, for the bundle and
 * for the plain tsc build. Targets: batch-1 requests/s >= 0.8x hello; batch 64 >= 100,000
 * samples/s; small p99 under large load <= 2x alone; start <= 500 ms.
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

/** The hello server, in a child process like the edge worker. */
async function startHello() {
  const child = fork(new URL('./server.js', import.meta.url), [], {
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

interface Measured {
  samples: Record<'hello' | 'one' | 'json64' | 'binary64' | 'binaryIn64', Figures[]>;
  /** Small requests at low concurrency, alone and beside a stream of large batches. */
  alone: Figures;
  mixed: Figures;
}

/** The interleaved rounds against the hello and the edge worker, then the small-request tail. */
async function measureHttp(req: ReturnType<typeof requests>): Promise<Measured> {
  const hello = await startHello();
  const edge = await startEdge(entries.bundle, req.one);
  const infer = `${edge.base}/v2/models/edge/infer`;
  const samples: Measured['samples'] = {
    hello: [],
    one: [],
    json64: [],
    binary64: [],
    binaryIn64: [],
  };
  try {
    await load(`${hello.base}/`, req.one, 4);
    await load(infer, req.one, 4);
    await load(infer, req.binary64, 3);
    for (let round = 0; round < rounds; round += 1) {
      const pair = [
        async () => samples.hello.push(await load(`${hello.base}/`, req.one, seconds)),
        async () => samples.one.push(await load(infer, req.one, seconds)),
      ];
      if (round % 2 === 1) pair.reverse();
      for (const run of pair) await run();
      samples.binary64.push(await load(infer, req.binary64, seconds));
      samples.binaryIn64.push(await load(infer, req.binaryIn64, seconds));
      samples.json64.push(await load(infer, req.json64, seconds));
    }
    const alone = await timedLoad(infer, req.one, seconds * 2, 4);
    const [mixed] = await Promise.all([
      timedLoad(infer, req.one, seconds * 2, 4),
      load(infer, req.binary64, seconds * 2, 8),
    ]);
    return { samples, alone, mixed };
  } finally {
    await Promise.all([hello.stop(), edge.stop()]);
  }
}

function printHttp({ samples, alone, mixed }: Measured): void {
  const h = summary(samples.hello);
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
      ['hello (functions-framework), same body as batch 1', Math.round(h.rps), '', h.p50, h.p99],
      ['edge-infer batch 1 (OIP JSON)', Math.round(one.rps), Math.round(one.rps), one.p50, one.p99],
      rows64('edge-infer batch 64 (OIP binary in and out)', summary(samples.binary64)),
      rows64('edge-infer batch 64 (OIP binary in, JSON out)', summary(samples.binaryIn64)),
      rows64('edge-infer batch 64 (OIP JSON)', summary(samples.json64)),
    ],
  );
  printTable(
    'small requests (batch 1, 4 connections; percentiles of every response time, to 0.01 ms)',
    ['condition', 'requests/s', 'p50 ms', 'p99 ms'],
    [
      ['alone', Math.round(alone.rps), alone.p50, alone.p99],
      [
        'beside batch-64 binary requests (8 connections)',
        Math.round(mixed.rps),
        mixed.p50,
        mixed.p99,
      ],
    ],
  );
}

function report({ samples, alone, mixed }: Measured, starts: Record<'bundle' | 'tsc', number[]>) {
  const h = summary(samples.hello);
  const one = summary(samples.one);
  const ratio = median(samples.one.map((s, i) => s.rps / samples.hello[i]!.rps));
  const samplesPerSecond = Math.round(summary(samples.binary64).rps * 64);
  const p99Ratio = mixed.p99 / alone.p99;
  const startMs = Math.round(median(starts.bundle));
  finish(
    'edge-infer',
    {
      hello_rps: Math.round(h.rps),
      batch1_rps: Math.round(one.rps),
      batch1_p50_ms: one.p50,
      batch1_p99_ms: one.p99,
      batch1_ratio: Number(ratio.toFixed(3)),
      batch64_binary_samples_per_s: samplesPerSecond,
      batch64_binary_in_json_out_samples_per_s: Math.round(summary(samples.binaryIn64).rps * 64),
      batch64_json_samples_per_s: Math.round(summary(samples.json64).rps * 64),
      small_p99_alone_ms: alone.p99,
      small_p99_mixed_ms: mixed.p99,
      small_p99_ratio: Number(p99Ratio.toFixed(2)),
      start_to_first_prediction_ms: startMs,
      start_to_first_prediction_tsc_build_ms: Math.round(median(starts.tsc)),
    },
    {
      batch1_ratio: { value: Number(ratio.toFixed(3)), op: '>=', target: 0.8 },
      batch64_binary_samples_per_s: { value: samplesPerSecond, op: '>=', target: 100_000 },
      small_p99_ratio: { value: Number(p99Ratio.toFixed(2)), op: '<=', target: 2 },
      start_to_first_prediction_ms: { value: startMs, op: '<=', target: 500 },
    },
  );
}

export async function main(): Promise<void> {
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
