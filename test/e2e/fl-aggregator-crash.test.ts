/**
 * The aggregator as a real process (the image's bundle), SIGKILLed in the middle of aggregating
 * a round, then started again: the round's updates were all kept (nothing lost), the restarted
 * process takes over the dead one's claim once its lease lapses and commits the round once
 * (nothing twice), and the model it makes is byte for byte the FedAvg of the same updates.
 * Averaging three updates of a 1.8M-parameter model, saving it and evaluating it on 6,000 digits
 * (onnxruntime) takes long enough to be caught mid-way.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeDatasetCsv } from '../../shared/fl/dataset-file.js';
import { fedAvg } from '../../shared/fl/fedavg.js';
import { createRoundStore } from '../../shared/fl/round-store.js';
import type { RoundStore } from '../../shared/fl/round-store.js';
import { encodeWeights } from '../../shared/fl/weights.js';
import type { Tensor } from '../../shared/fl/weights.js';
import type { FlJobConfig } from '../../shared/messages/federated.js';
import { seededRandom } from '../../shared/random/index.js';
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
const trainers = ['edge0', 'edge1', 'edge2'];
const uid = randomUUID();

/** Each trainer's update: the base weights moved by a seeded amount. */
function updateOf(base: Map<string, Tensor>, seed: number): Map<string, Tensor> {
  const uniform = seededRandom(seed);
  const out = new Map<string, Tensor>();
  for (const [name, t] of base) {
    const values = Float32Array.from(t.values, (v) => v + (uniform() - 0.5) * 0.1);
    out.set(name, { dims: [...t.dims], values });
  }
  return out;
}

describe('fl-aggregator SIGKILLed mid-aggregation', () => {
  const dir = join(root, `.test-build-${randomUUID()}`);
  let redis: TestRedis;
  let store: RoundStore;
  let model: Uint8Array;
  let env: Record<string, string>;
  let url: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    await exec('npm', ['run', '-s', 'bundle', '--', `--outdir=${join(dir, 'bundle')}`], {
      cwd: root,
    });
    mkdirSync(join(dir, 'models'), { recursive: true });
    const network = new Network(
      [1, 28, 28],
      [
        { type: 'flatten' },
        { type: 'dense', units: 1024 },
        { type: 'relu' },
        { type: 'dense', units: 1024 },
        { type: 'relu' },
        { type: 'dense', units: 10 },
      ],
    );
    network.initialize(seededRandom(1));
    model = exportOnnx(network, 'big', 'test');
    writeFileSync(join(dir, 'models', 'initial.onnx'), model);
    const uniform = seededRandom(2);
    const n = 6000;
    const x = Float32Array.from({ length: n * 784 }, () => uniform());
    const y = Uint8Array.from({ length: n }, (_, i) => i % 10);
    writeFileSync(join(dir, 'evaluation.csv'), writeDatasetCsv({ x, y, n }));
    redis = await testRedis();
    store = createRoundStore(redis.client, `default/big/${uid}`);
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const config: FlJobConfig = {
      job: 'default/big',
      uid,
      initialModel: { url: `file://${join(dir, 'models', 'initial.onnx')}` },
      trainers: trainers.map((name) => ({ name, node: name, url: 'http://127.0.0.1:9' })),
      round: { minParticipants: 3, timeoutMs: 600_000, acceptFailures: true },
      stop: { maxRounds: 5, patience: 1 },
      training: { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 1, proximalMu: 0 },
      aggregation: { kind: 'fedavg' },
      selection: { fraction: 1, minimum: 1, seed: 1 },
      evaluation: { url: `file://${join(dir, 'evaluation.csv')}`, format: 'csv' },
      publicUrl: url,
    };
    env = {
      ...(process.env as Record<string, string>),
      ...redis.env,
      REDIS_KEY_PREFIX: redis.prefix,
      FUNCTION_TARGET: 'fl-aggregator',
      PORT: String(port),
      FL_JOB_CONFIG: JSON.stringify(config),
      FL_CLAIM_LEASE_MS: '1500',
      MODEL_ROOT: join(dir, 'models'),
      BODY_LIMIT_BYTES: String(32 << 20),
      LOG_LEVEL: 'warn',
      ...Object.fromEntries(trainers.map((t, i) => [`FL_TRAINER_TOKEN_${i}`, `token-${t}`])),
    };
  }, 180_000);

  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await redis.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async () => {
    const child = spawn('node', [join(dir, 'bundle', 'serve.mjs')], { env, stdio: 'ignore' });
    children.push(child);
    await until('the aggregator ready', async () =>
      (await fetch(`${url}/health/readiness`)).status === 200 ? true : undefined,
    );
    return child;
  };

  const send = (worker: string, weights: Uint8Array) =>
    fetch(`${url}/`, {
      method: 'POST',
      headers: {
        'ce-specversion': '1.0',
        'ce-type': 'io.edgeai.fl.update',
        'ce-source': `/fl/default/big/trainers/${worker}`,
        'ce-id': `${worker}.r1`,
        'ce-fljob': 'default/big',
        'ce-flworker': worker,
        'ce-flround': '1',
        'ce-flbase': '0',
        'ce-flsamples': String(100 * (trainers.indexOf(worker) + 1)),
        'content-type': 'application/octet-stream',
        authorization: `Bearer token-${worker}`,
        'x-edgeai-node': worker,
      },
      body: weights,
    });

  it('loses no update, commits the round once, and makes the same model', async () => {
    const first = await start();
    const base = readInitializers(model);
    const updates = trainers.map((worker, i) => ({
      worker,
      samples: 100 * (i + 1),
      weights: updateOf(base, 10 + i),
    }));
    for (const u of updates)
      expect((await send(u.worker, encodeWeights(u.weights))).status).toBe(202);
    // The third update made the quorum: the round is being aggregated (averaged, evaluated).
    await until('aggregating', async () =>
      (await store.state())?.status === 'aggregating' ? true : undefined,
    );
    first.kill('SIGKILL');
    await once(first, 'exit');
    expect(await store.state()).toMatchObject({ status: 'aggregating', round: 1, n: 3 });
    expect(await store.history()).toEqual([]);
    expect((await store.updates()).map((u) => u.worker)).toEqual(trainers);

    await start();
    const next = await until('round 2', async () => {
      const state = await store.state();
      return state?.round === 2 ? state : undefined;
    });
    expect(next).toMatchObject({ status: 'open', base: 1, version: 1, n: 0 });
    const history = (await store.history()).map(
      (h) => JSON.parse(h) as { round: number; participants: number },
    );
    expect(history).toEqual([expect.objectContaining({ round: 1, participants: 3 })]);
    const expected = replaceInitializers(model, fedAvg(base, updates));
    const made = await store.model(1);
    const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
    expect(sha(made ?? new Uint8Array())).toBe(sha(expected));
    expect(next.sha).toBe(sha(expected));
    for (const worker of trainers) expect((await store.workers()).get(worker)?.accepted).toBe(1);
    // A trainer resending its round-1 update now: counted once already.
    expect((await send('edge0', encodeWeights(updates[0]!.weights))).status).toBe(200);
  }, 180_000);
});
