/**
 * bench/edge-infer: the edge worker over HTTP, next to a bare functions-framework hello measured
 * in the same run (rounds interleaved, medians). Batch 1 as OIP JSON; batch 64 as OIP with the
 * binary tensor extension (and as JSON, for comparison); small requests' p99 idle and while
 * large batches run; process start to first prediction. Targets: batch-1 requests/s >= 0.8x
 * hello; batch 64 >= 100,000 samples/s; small p99 under large load <= 2x idle; start <= 500 ms.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { loadMnist, pixels } from '../../shared/training/data.js';
import { finish, median, printTable } from '../support/report.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 4);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 3);
const connections = 32;
const root = new URL('../../../', import.meta.url);

interface Figures {
  rps: number;
  p50: number;
  p99: number;
}

function edgeEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    MODEL_URL: new URL('models/edge.onnx', root).href,
    MODEL_ROOT: new URL('models/', root).pathname,
    HEM_NAME: 'EdgeOnly',
    MAX_BATCH: '256',
    BODY_LIMIT_BYTES: String(4 << 20),
    LOG_LEVEL: 'info',
  };
}

async function startChild(mode: 'hello' | 'edge') {
  const child = fork(new URL('./server.js', import.meta.url), [mode], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: mode === 'edge' ? edgeEnv() : process.env,
  });
  const [message] = (await once(child, 'message')) as [{ port: number }];
  return {
    base: `http://127.0.0.1:${message.port}`,
    async stop() {
      child.kill();
      await once(child, 'exit');
    },
  };
}

function requests() {
  const { test } = loadMnist();
  const jsonBody = (rows: number) =>
    JSON.stringify({
      inputs: [
        {
          name: 'input',
          shape: [rows, 784],
          datatype: 'FP32',
          data: Array.from(test.x.subarray(0, rows * pixels)),
        },
      ],
    });
  const binaryBody = (rows: number, outputs?: string[]) => {
    const header = Buffer.from(
      JSON.stringify({
        ...(outputs === undefined ? {} : { outputs: outputs.map((name) => ({ name })) }),
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
    return { header, body: Buffer.concat([header, Buffer.from(data.buffer)]) };
  };
  const json = { 'content-type': 'application/json' };
  const b64 = binaryBody(64);
  const labels64 = binaryBody(64, ['label', 'tier']);
  return {
    one: { method: 'POST' as const, headers: json, body: jsonBody(1) },
    json64: { method: 'POST' as const, headers: json, body: jsonBody(64) },
    labels64: {
      method: 'POST' as const,
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(labels64.header.length),
      },
      body: labels64.body,
    },
    binary64: {
      method: 'POST' as const,
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(b64.header.length),
      },
      body: b64.body,
    },
  };
}

interface Request {
  method: 'POST';
  headers: Record<string, string>;
  body: string | Buffer;
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

const summary = (list: Figures[]): Figures => ({
  rps: median(list.map((s) => s.rps)),
  p50: median(list.map((s) => s.p50)),
  p99: median(list.map((s) => s.p99)),
});

/** Fork to first prediction, a few times (the model loads and a worker thread starts each time). */
async function startup(request: Request, times: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < times; i += 1) {
    const started = performance.now();
    const child = await startChild('edge');
    const answer = await fetch(`${child.base}/v2/models/edge/infer`, request);
    if (answer.status !== 200) throw new Error(`first prediction answered ${answer.status}`);
    await answer.arrayBuffer();
    out.push(performance.now() - started);
    await child.stop();
  }
  return out;
}

export async function main(): Promise<void> {
  const req = requests();
  process.stdout.write(
    `bench/edge-infer: ${rounds} interleaved rounds of ${seconds}s, ${connections} connections\n`,
  );
  const hello = await startChild('hello');
  const edge = await startChild('edge');
  const infer = `${edge.base}/v2/models/edge/infer`;
  const samples = {
    hello: [] as Figures[],
    one: [] as Figures[],
    json64: [] as Figures[],
    binary64: [] as Figures[],
    labels64: [] as Figures[],
  };
  let idle: Figures;
  let mixed: Figures;
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
      samples.json64.push(await load(infer, req.json64, seconds));
      samples.labels64.push(await load(infer, req.labels64, seconds));
    }
    // Small requests at low concurrency, alone and beside a stream of large batches.
    idle = await load(infer, req.one, seconds * 2, 4);
    const [small] = await Promise.all([
      load(infer, req.one, seconds * 2, 4),
      load(infer, req.binary64, seconds * 2, 8),
    ]);
    mixed = small;
  } finally {
    await Promise.all([hello.stop(), edge.stop()]);
  }
  const starts = await startup(req.one, 3);
  const h = summary(samples.hello);
  const one = summary(samples.one);
  const b64 = summary(samples.binary64);
  const j64 = summary(samples.json64);
  const l64 = summary(samples.labels64);
  const ratios = samples.one.map((s, i) => s.rps / samples.hello[i]!.rps);
  printTable(
    'HTTP, medians of the rounds',
    ['request', 'requests/s', 'samples/s', 'p50 ms', 'p99 ms'],
    [
      ['hello (functions-framework), same body as batch 1', Math.round(h.rps), '', h.p50, h.p99],
      ['edge-infer batch 1 (OIP JSON)', Math.round(one.rps), Math.round(one.rps), one.p50, one.p99],
      [
        'edge-infer batch 64 (OIP binary)',
        Math.round(b64.rps),
        Math.round(b64.rps * 64),
        b64.p50,
        b64.p99,
      ],
      [
        'edge-infer batch 64 (OIP JSON)',
        Math.round(j64.rps),
        Math.round(j64.rps * 64),
        j64.p50,
        j64.p99,
      ],
      [
        'edge-infer batch 64 (OIP binary, outputs label+tier)',
        Math.round(l64.rps),
        Math.round(l64.rps * 64),
        l64.p50,
        l64.p99,
      ],
    ],
  );
  printTable(
    'small requests (batch 1, 4 connections)',
    ['condition', 'requests/s', 'p50 ms', 'p99 ms'],
    [
      ['alone', Math.round(idle.rps), idle.p50, idle.p99],
      [
        'beside batch-64 binary requests (8 connections)',
        Math.round(mixed.rps),
        mixed.p50,
        mixed.p99,
      ],
    ],
  );
  printTable(
    'process start to first prediction',
    ['run', 'ms'],
    starts.map((ms, i) => [i + 1, Math.round(ms)]),
  );
  const ratio = median(ratios);
  const samplesPerSecond = Math.round(b64.rps * 64);
  const p99Ratio = mixed.p99 / Math.max(idle.p99, 1);
  const startMs = Math.round(median(starts));
  finish(
    'edge-infer',
    {
      hello_rps: Math.round(h.rps),
      batch1_rps: Math.round(one.rps),
      batch1_p50_ms: one.p50,
      batch1_p99_ms: one.p99,
      batch1_ratio: Number(ratio.toFixed(3)),
      batch64_binary_samples_per_s: samplesPerSecond,
      batch64_json_samples_per_s: Math.round(j64.rps * 64),
      batch64_binary_labels_samples_per_s: Math.round(l64.rps * 64),
      small_p99_idle_ms: idle.p99,
      small_p99_mixed_ms: mixed.p99,
      small_p99_ratio: Number(p99Ratio.toFixed(2)),
      start_to_first_prediction_ms: startMs,
    },
    {
      batch1_ratio: { value: Number(ratio.toFixed(3)), op: '>=', target: 0.8 },
      batch64_binary_samples_per_s: { value: samplesPerSecond, op: '>=', target: 100_000 },
      small_p99_ratio: { value: Number(p99Ratio.toFixed(2)), op: '<=', target: 2 },
      start_to_first_prediction_ms: { value: startMs, op: '<=', target: 500 },
    },
  );
}
