/**
 * A federated job over HTTP — the aggregator and every trainer a process of the image's bundle,
 * trainers training on their own threads — gives, round for round, the same model bytes as the
 * same modules run in process (the way bench/fl-learning drives them): the trainers selected by
 * the seed, each trained by round-compute.ts on its Dataset as read back from its file, the
 * strategy's aggregate (FedAdam here: a server state carried through the store) in worker order,
 * the weights written into the model. Pathological non-IID (two label shards per trainer), 3 of
 * 5 trainers a round.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeDatasetCsv } from '../../shared/fl/dataset-file.js';
import { readDataset } from '../../shared/fl/dataset-source.js';
import { partition } from '../../shared/fl/partition.js';
import { computeRound, decodeModel } from '../../shared/fl/round-compute.js';
import { createRoundStore } from '../../shared/fl/round-store.js';
import { aggregate } from '../../shared/fl/strategy/aggregate.js';
import { selectClients } from '../../shared/fl/strategy/selection.js';
import { initialState } from '../../shared/fl/strategy/state.js';
import type { StrategyState } from '../../shared/fl/strategy/types.js';
import { decodeWeights } from '../../shared/fl/weights.js';
import { fedOptDefaults } from '../../shared/messages/federated.js';
import type { FlJobConfig } from '../../shared/messages/federated.js';
import { seededRandom } from '../../shared/random/index.js';
import { loadMnist } from '../../shared/training/data.js';
import { Network } from '../../shared/training/network.js';
import {
  exportOnnx,
  readInitializers,
  replaceInitializers,
} from '../../shared/training/onnx-export.js';
import { freePort } from '../../local/index.js';
import { testRedis } from '../support/redis.js';
import type { TestRedis } from '../support/redis.js';
import { until } from '../support/wait.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const exec = promisify(execFile);
const names = ['edge0', 'edge1', 'edge2', 'edge3', 'edge4'];
const rounds = 3;
const strategy = fedOptDefaults.fedadam;
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('a federated job over HTTP against the same modules in process', () => {
  const dir = join(root, `.test-build-${randomUUID()}`);
  const children: ChildProcess[] = [];
  let redis: TestRedis;
  let config: FlJobConfig;
  let model: Uint8Array;
  let files: string[];

  beforeAll(async () => {
    await exec('npm', ['run', '-s', 'bundle', '--', `--outdir=${join(dir, 'bundle')}`], {
      cwd: root,
    });
    mkdirSync(join(dir, 'data'), { recursive: true });
    const network = new Network(
      [1, 28, 28],
      [
        { type: 'flatten' },
        { type: 'dense', units: 32 },
        { type: 'relu' },
        { type: 'dense', units: 10 },
      ],
    );
    network.initialize(seededRandom(11));
    model = exportOnnx(network, 'small', 'test');
    writeFileSync(join(dir, 'data', 'initial.onnx'), model);
    const digits = loadMnist();
    const head = [...Array(600).keys()];
    const labels = head.map((i) => digits.train.y[i]!);
    const shares = partition(labels, { kind: 'shards', clients: names.length, seed: 3 });
    files = shares.map((indices, i) => {
      const file = join(dir, 'data', `${names[i]}.csv`);
      writeFileSync(file, writeDatasetCsv(digits.train, indices));
      return file;
    });
    redis = await testRedis();
  }, 180_000);

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(env: Record<string, string>): ChildProcess {
    const child = spawn('node', [join(dir, 'bundle', 'serve.mjs')], {
      env: { ...(process.env as Record<string, string>), LOG_LEVEL: 'warn', ...env },
      stdio: 'ignore',
    });
    children.push(child);
    return child;
  }

  /** The job over HTTP: the model bytes of each version, as the store kept them. */
  async function overHttp(): Promise<string[]> {
    const uid = randomUUID();
    const aggregatorPort = await freePort();
    const ports = await Promise.all(names.map(() => freePort()));
    const url = `http://127.0.0.1:${aggregatorPort}`;
    config = {
      job: 'default/match',
      uid,
      initialModel: { url: pathToFileURL(join(dir, 'data', 'initial.onnx')).href },
      trainers: names.map((name, i) => ({ name, node: name, url: `http://127.0.0.1:${ports[i]}` })),
      round: { minParticipants: 3, timeoutMs: 120_000, acceptFailures: true },
      stop: { maxRounds: rounds, patience: 1 },
      training: { epochs: 2, batchSize: 10, learningRate: 0.05, seed: 5, proximalMu: 0 },
      aggregation: strategy,
      selection: { fraction: 0.6, minimum: 1, seed: 9 },
      publicUrl: url,
    };
    names.forEach((name, i) =>
      start({
        FUNCTION_TARGET: 'fl-trainer',
        PORT: String(ports[i]),
        FL_JOB: config.job,
        FL_WORKER: name,
        FL_AGGREGATOR_URL: url,
        DATASET_URL: pathToFileURL(files[i]!).href,
        DATASET_FORMAT: 'csv',
        EDGEAI_NODE: name,
        EDGEAI_NODE_TOKEN: `token-${name}`,
        BODY_LIMIT_BYTES: String(9 << 20),
      }),
    );
    start({
      ...redis.env,
      REDIS_KEY_PREFIX: redis.prefix,
      FUNCTION_TARGET: 'fl-aggregator',
      PORT: String(aggregatorPort),
      FL_JOB_CONFIG: JSON.stringify(config),
      MODEL_ROOT: join(dir, 'data'),
      ...Object.fromEntries(names.map((name, i) => [`FL_TRAINER_TOKEN_${i}`, `token-${name}`])),
    });
    const store = createRoundStore(redis.client, `${config.job}/${uid}`);
    const seen = new Map<number, string>();
    await until(
      'the job done',
      async () => {
        const state = await store.state();
        if (state !== undefined) seen.set(state.version, state.sha);
        return state?.status === 'done' ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 20 },
    );
    const history = (await store.history()).map(
      (h) => JSON.parse(h) as { round: number; version: number; participants: number },
    );
    expect(history.map((h) => [h.round, h.participants])).toEqual([
      [3, 3],
      [2, 3],
      [1, 3],
    ]);
    return [...Array(rounds + 1).keys()].map((v) => seen.get(v) ?? 'missed');
  }

  /** The same rounds in process: the digest of each version. */
  async function inProcess(): Promise<string[]> {
    const digests = [sha256(model)];
    let current = model;
    let state: StrategyState = initialState;
    for (let round = 1; round <= rounds; round += 1) {
      const selected = selectClients({
        available: names,
        ...config.selection,
        round,
      });
      const updates = [];
      for (const name of selected) {
        const source = {
          url: pathToFileURL(files[names.indexOf(name)]!).href,
          format: 'csv',
          maxBytes: 1 << 26,
        };
        const trained = await computeRound(decodeModel(current), config.training, {
          read: readDataset,
          source,
        });
        const base = readInitializers(current);
        updates.push({
          worker: name,
          samples: trained.samples,
          weights: decodeWeights(trained.encoded, { maxBytes: 1 << 26, maxTensors: base.size }),
        });
      }
      const result = aggregate(strategy, readInitializers(current), updates, state, round);
      state = result.state;
      current = replaceInitializers(current, result.weights);
      digests.push(sha256(current));
    }
    return digests;
  }

  it('makes every version byte for byte', async () => {
    const http = await overHttp();
    expect(http.every((d) => d !== 'missed')).toBe(true);
    expect(await inProcess()).toEqual(http);
  }, 240_000);
});
