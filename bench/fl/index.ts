/**
 * bench/fl: a federated job over HTTP, every function a process of the image's bundle (as Knative
 * runs them) on one Redis: an aggregator and 10 trainers, the 784-256-10 digit MLP (203,530
 * parameters), the mnist training digits split IID over the trainers, 5 rounds (E=1, B=10),
 * evaluated on the test digits. Two figures:
 * - fl_round_overhead_share: per round, the round's wall time (opened to committed) minus the
 *   slowest trainer's own training time, over the round's wall time: what the system adds to the
 *   training it waits for (target <= 0.05). Summed over the rounds; beside it the same after
 *   round 1 (whose first runs of every code path, onnxruntime's first session among them, cost
 *   the most) and the median round's overhead in ms. The trainers are up before the job starts.
 * - fl_update_ingest_mb_per_s: one aggregator taking rounds of 10 updates of 0.81 MB, sent at once
 *   by 10 clients: bytes of weights from the first update sent to the round committed (checked,
 *   stored, averaged, saved; the commit's time is the next round's opening, as the aggregator
 *   records it), per second, with every round's events (the model pushed with each) taken by a
 *   server standing in for the 10 trainers, the median of 8 rounds after 4 of warm-up (target
 *   >= 100). Beside it, the same bytes posted to a bare node:http server that only reads them
 *   (the same run's ceiling), measured the same way.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { writeDatasetCsv } from '../../shared/fl/dataset-file.js';
import { partition } from '../../shared/fl/partition.js';
import { createRoundStore } from '../../shared/fl/round-store.js';
import type { RoundStore } from '../../shared/fl/round-store.js';
import { encodeWeights } from '../../shared/fl/weights.js';
import type { Tensor } from '../../shared/fl/weights.js';
import type { FlJobConfig } from '../../shared/messages/federated.js';
import { seededRandom } from '../../shared/random/index.js';
import { loadConfig } from '../../shared/config/index.js';
import { requireRedis } from '../../shared/redis/index.js';
import type { RedisClient } from '../../shared/redis/index.js';
import { loadMnist } from '../../shared/training/data.js';
import { mlp256 } from '../../shared/training/models.js';
import { Network } from '../../shared/training/network.js';
import { exportOnnx, readInitializers } from '../../shared/training/onnx-export.js';
import { freePort, startRedisServer } from '../../local/index.js';
import { finish, median, printTable } from '../support/report.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const bundle = join(root, 'dist', 'bundle', 'serve.mjs');
const trainers = 10;
const rounds = 5;
const ingestRounds = 8;
/** Rounds sent first and not counted (JIT, caches, connections): steady state is measured. */
const warmupRounds = 4;

interface RoundLine {
  round: number;
  participants: number;
  durationMs: number;
  slowestTrainMs?: number;
  loss?: number;
  accuracy?: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function start(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [bundle], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
  });
}

async function ready(url: string, child: ChildProcess): Promise<void> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${url} exited with ${child.exitCode}`);
    const answer = await fetch(`${url}/health/readiness`).catch(() => undefined);
    if (answer?.status === 200) return;
    await sleep(20);
  }
}

/** The initial model, the trainers' Datasets and the evaluation set, in `dir`. */
function writeInputs(dir: string): { model: string; datasets: string[]; evaluation: string } {
  const network = new Network([1, 28, 28], mlp256.layers);
  network.initialize(seededRandom(20261127));
  const model = join(dir, 'initial.onnx');
  writeFileSync(model, exportOnnx(network, 'mlp256', 'bench/fl'));
  const data = loadMnist();
  const shares = partition(data.train.y, { kind: 'iid', clients: trainers, seed: 1 });
  const datasets = shares.map((indices, i) => {
    const file = join(dir, `client-${i}.csv`);
    writeFileSync(file, writeDatasetCsv(data.train, indices));
    return file;
  });
  const evaluation = join(dir, 'evaluation.csv');
  writeFileSync(evaluation, writeDatasetCsv(data.test));
  return { model, datasets, evaluation };
}

interface Job {
  store: RoundStore;
  aggregator: { url: string; child: ChildProcess };
  children: ChildProcess[];
}

/** An aggregator (and, with datasets, one trainer per dataset) for job `name`. */
async function startJob(
  redis: { url: string; client: RedisClient },
  name: string,
  inputs: { model: string; datasets?: string[]; evaluation?: string },
  maxRounds: number,
  /** Where the trainers are told of rounds, when no trainer process runs (ingest). */
  receiver?: string,
): Promise<Job> {
  const uid = `${name}-${Date.now()}`;
  const aggregatorPort = await freePort();
  const url = `http://127.0.0.1:${aggregatorPort}`;
  const ports = await Promise.all(Array.from({ length: trainers }, () => freePort()));
  const names = ports.map((_, i) => `client-${i}`);
  const config: FlJobConfig = {
    job: `bench/${name}`,
    uid,
    initialModel: { url: pathToFileURL(inputs.model).href },
    trainers: names.map((n, i) => ({
      name: n,
      node: `node-${i}`,
      url: receiver ?? `http://127.0.0.1:${ports[i]}`,
    })),
    round: { minParticipants: trainers, timeoutMs: 300_000, acceptFailures: true },
    stop: { maxRounds, patience: 1 },
    training: { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 1, proximalMu: 0 },
    aggregation: { kind: 'fedavg' },
    selection: { fraction: 1, minimum: 1, seed: 1 },
    ...(inputs.evaluation === undefined
      ? {}
      : { evaluation: { url: pathToFileURL(inputs.evaluation).href, format: 'csv' } }),
    publicUrl: url,
  };
  const children: ChildProcess[] = [];
  const datasets = inputs.datasets ?? [];
  datasets.forEach((file, i) => {
    children.push(
      start({
        FUNCTION_TARGET: 'fl-trainer',
        PORT: String(ports[i]),
        FL_JOB: config.job,
        FL_WORKER: names[i]!,
        FL_AGGREGATOR_URL: url,
        DATASET_URL: pathToFileURL(file).href,
        DATASET_FORMAT: 'csv',
        EDGEAI_NODE: `node-${i}`,
        EDGEAI_NODE_TOKEN: `token-${i}`,
        // As reconcile-tick sets it: room for the model pushed with the round.
        BODY_LIMIT_BYTES: String(9 << 20),
      }),
    );
  });
  // The trainers are up when the job's first round opens (Knative starts a new Service's first
  // pod at once): their start-up is the platform's, not a round's.
  await Promise.all(children.map((c, i) => ready(`http://127.0.0.1:${ports[i]}`, c)));
  const child = start({
    FUNCTION_TARGET: 'fl-aggregator',
    PORT: String(aggregatorPort),
    REDIS_URL: redis.url,
    FL_JOB_CONFIG: JSON.stringify(config),
    MODEL_ROOT: join(inputs.model, '..'),
    BODY_LIMIT_BYTES: String(8 << 20),
    ...Object.fromEntries(names.map((_, i) => [`FL_TRAINER_TOKEN_${i}`, `token-${i}`])),
  });
  children.push(child);
  await ready(url, child);
  return {
    store: createRoundStore(redis.client, `${config.job}/${uid}`),
    aggregator: { url, child },
    children,
  };
}

/**
 * How often the bench asks the store whether a round (or the job) ended. Every figure is read off
 * the aggregator's own clock (the round's history, the next round's opening), so asking more
 * often would only add the bench's own CPU to the machine it measures: at 5 ms its polling took
 * about a tenth of a core all through the rounds (perf, 2026-11-28).
 */
const pollMs = 50;

async function finished(store: RoundStore, round?: number): Promise<void> {
  for (;;) {
    const state = await store.state();
    if (state?.status === 'done' || state?.status === 'failed') return;
    if (round !== undefined && state !== undefined && state.round > round) return;
    await sleep(pollMs);
  }
}

/** Part one: the job, trained; the rounds' wall time against their slowest training. */
async function trainedJob(redis: { url: string; client: RedisClient }, dir: string) {
  const inputs = writeInputs(dir);
  const job = await startJob(redis, 'digits', inputs, rounds);
  await finished(job.store);
  const lines = (await job.store.history()).map((h) => JSON.parse(h) as RoundLine).reverse();
  job.children.forEach((c) => c.kill('SIGTERM'));
  printTable(
    `a federated job: ${trainers} trainer processes, mlp256 (203,530 parameters), IID digits, E=1 B=10`,
    [
      'round',
      'participants',
      'wall ms',
      'slowest training ms',
      'overhead ms',
      'share',
      'loss',
      'accuracy',
    ],
    lines.map((l) => [
      l.round,
      l.participants,
      l.durationMs,
      l.slowestTrainMs ?? 0,
      l.durationMs - (l.slowestTrainMs ?? 0),
      (l.durationMs - (l.slowestTrainMs ?? 0)) / l.durationMs,
      l.loss ?? 0,
      l.accuracy ?? 0,
    ]),
  );
  const share = (from: readonly RoundLine[]) => {
    const wall = from.reduce((s, l) => s + l.durationMs, 0);
    const training = from.reduce((s, l) => s + (l.slowestTrainMs ?? 0), 0);
    return (wall - training) / wall;
  };
  return {
    share: share(lines),
    warmShare: share(lines.slice(1)),
    overheadMs: median(lines.map((l) => l.durationMs - (l.slowestTrainMs ?? 0))),
    accuracy: lines.at(-1)?.accuracy ?? 0,
    lines,
  };
}

/** An update of each of the 10 clients: the model's weights, moved a little. */
function updates(model: Uint8Array): Uint8Array[] {
  const base = readInitializers(model);
  return Array.from({ length: trainers }, (_, i) => {
    const uniform = seededRandom(100 + i);
    const moved = new Map<string, Tensor>();
    for (const [name, t] of base)
      moved.set(name, {
        dims: [...t.dims],
        values: Float32Array.from(t.values, (v) => v + (uniform() - 0.5) * 0.01),
      });
    return encodeWeights(moved);
  });
}

function post(url: string, worker: number, round: number, body: Uint8Array) {
  return fetch(`${url}/`, {
    method: 'POST',
    headers: {
      'ce-specversion': '1.0',
      'ce-type': 'io.edgeai.fl.update',
      'ce-source': `/fl/bench/ingest/trainers/client-${worker}`,
      'ce-id': `client-${worker}.r${round}`,
      'ce-fljob': 'bench/ingest',
      'ce-flworker': `client-${worker}`,
      'ce-flround': String(round),
      'ce-flbase': String(round - 1),
      'ce-flsamples': '702',
      'content-type': 'application/octet-stream',
      authorization: `Bearer token-${worker}`,
      'x-edgeai-node': `node-${worker}`,
    },
    body,
  });
}

/**
 * Where the ingest job's trainers are: a server that takes each round event (the model pushed
 * with it) and answers 202, as a trainer already training would, so the aggregator's fan-out
 * of every round costs what it costs with trainers there (not refused connections, retried).
 */
async function roundReceiver() {
  const server = createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => res.writeHead(202, { 'content-length': 0 }).end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

/** Part two: rounds of 10 updates sent at once to one aggregator, to the round's commit. */
async function ingest(redis: { url: string; client: RedisClient }, dir: string) {
  const model = join(dir, 'initial.onnx');
  const receiver = await roundReceiver();
  const job = await startJob(
    redis,
    'ingest',
    { model },
    warmupRounds + ingestRounds + 1,
    receiver.url,
  );
  const bodies = updates(
    new Uint8Array(await (await fetch(`${job.aggregator.url}/v1/models/0`)).arrayBuffer()),
  );
  const bytes = bodies.reduce((s, b) => s + b.length, 0);
  const rates: number[] = [];
  for (let round = 1; round <= warmupRounds + ingestRounds; round += 1) {
    const started = Date.now();
    const answers = await Promise.all(bodies.map((b, i) => post(job.aggregator.url, i, round, b)));
    if (answers.some((a) => a.status !== 202))
      throw new Error(`round ${round}: ${answers.map((a) => a.status).join(',')}`);
    await finished(job.store, round);
    // Committed when the next round opened, by the aggregator's clock (this machine's): the
    // bench's own polling is not the aggregator's time.
    const next = await job.store.state();
    if (next?.round !== round + 1) throw new Error(`round ${round} did not open the next one`);
    if (round > warmupRounds) rates.push(bytes / 1e6 / ((next.openedMs - started) / 1000));
  }
  job.children.forEach((c) => c.kill('SIGTERM'));
  receiver.close();
  return { bytes, rate: median(rates), rates };
}

/** The ceiling: the same 10 bodies posted at once to a node:http server that only reads them. */
async function bareCeiling(bodies: number, size: number): Promise<number> {
  const server = createServer((req, res) => {
    req.on('data', () => {});
    req.on('end', () => res.writeHead(202).end());
  });
  await new Promise<void>((resolve) => server.listen(0, resolve));
  const { port } = server.address() as { port: number };
  const body = new Uint8Array(size);
  const rates: number[] = [];
  for (let i = 0; i < warmupRounds + ingestRounds; i += 1) {
    const started = performance.now();
    await Promise.all(
      Array.from({ length: bodies }, () =>
        fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body }),
      ),
    );
    if (i >= warmupRounds)
      rates.push((bodies * size) / 1e6 / ((performance.now() - started) / 1000));
  }
  server.close();
  return median(rates);
}

export async function main(): Promise<void> {
  const server = await startRedisServer();
  const client = requireRedis(loadConfig({ REDIS_URL: server.url }).redis, 'bench', () => {});
  const redis = { url: server.url, client };
  const dir = mkdtempSync(join(tmpdir(), 'edgeai-bench-fl-'));
  try {
    const job = await trainedJob(redis, dir);
    const taken = await ingest(redis, dir);
    const ceiling = await bareCeiling(trainers, taken.bytes / trainers);
    printTable(
      `one aggregator, rounds of ${trainers} updates of ${(taken.bytes / trainers / 1e6).toFixed(2)} MB sent at once (median of ${ingestRounds}, after ${warmupRounds} not counted)`,
      ['path', 'MB/s', 'of the ceiling'],
      [
        ['bare node:http, reading the bodies (ceiling)', ceiling, 1],
        ['fl-aggregator: checked, stored, averaged, committed', taken.rate, taken.rate / ceiling],
      ],
    );
    finish(
      'fl',
      {
        fl_round_overhead_share: job.share,
        fl_round_overhead_share_after_round_1: job.warmShare,
        fl_round_overhead_median_ms: job.overheadMs,
        fl_update_ingest_mb_per_s: taken.rate,
        fl_ingest_bare_ceiling_mb_per_s: ceiling,
        fl_final_accuracy: job.accuracy,
      },
      {
        fl_round_overhead_share: { value: job.share, op: '<=', target: 0.05 },
        fl_update_ingest_mb_per_s: { value: taken.rate, op: '>=', target: 100 },
      },
    );
  } finally {
    client.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
