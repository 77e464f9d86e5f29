/**
 * A trainer's rounds on their own thread (shared/fl/training-thread.ts), as the compiled build
 * runs them (under the test runner the module is TypeScript, which a bare thread cannot load):
 * the same weights as the computation on the caller's thread; the thread at the niceness asked
 * while the process's own thread keeps its; the caller's event loop free while a round trains;
 * a superseded round stops its thread, and the next round starts another. The aggregator's
 * evaluation thread (shared/fl/evaluation-thread.ts) likewise: the same figures as on the
 * caller's thread, at its niceness, a model it cannot run refused without losing the thread.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeDatasetCsv } from '../../shared/fl/dataset-file.js';
import { readDataset } from '../../shared/fl/dataset-source.js';
import { inThreadTraining } from '../../shared/fl/round-compute.js';
import type { LocalTraining } from '../../shared/fl/round-compute.js';
import { evaluateOnnx } from '../../shared/fl/evaluation.js';
import type { evaluationThread as EvaluationThread } from '../../shared/fl/evaluation-thread.js';
import type { threadTraining as ThreadTraining } from '../../shared/fl/training-thread.js';
import { seededRandom } from '../../shared/random/index.js';
import { loadMnist } from '../../shared/training/data.js';
import { mlp256 } from '../../shared/training/models.js';
import { Network } from '../../shared/training/network.js';
import { exportOnnx } from '../../shared/training/onnx-export.js';
import { capturedTelemetry } from '../support/http.js';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../../', import.meta.url));
const training = { epochs: 1, batchSize: 10, learningRate: 0.05, seed: 3, proximalMu: 0 };

/** The niceness of each of this process's threads. */
function threadNiceness(): number[] {
  return readdirSync('/proc/self/task').map((task) => {
    const stat = readFileSync(`/proc/self/task/${task}/stat`, 'utf8');
    // Fields after the command's closing parenthesis: state is 3rd, nice the 19th.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}

describe('the training thread of the compiled build', () => {
  const dir = join(root, `.test-build-${randomUUID()}`);
  let threadTraining: typeof ThreadTraining;
  let evaluationThread: typeof EvaluationThread;
  let model: Uint8Array;
  let source: { url: string; format: string; maxBytes: number };
  const opened: LocalTraining[] = [];

  beforeAll(async () => {
    await run('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', join(dir, 'dist')], {
      cwd: root,
    });
    const built = pathToFileURL(join(dir, 'dist', 'shared', 'fl', 'training-thread.js')).href;
    ({ threadTraining } = (await import(built)) as { threadTraining: typeof ThreadTraining });
    const evaluation = pathToFileURL(join(dir, 'dist', 'shared', 'fl', 'evaluation-thread.js'));
    ({ evaluationThread } = (await import(evaluation.href)) as {
      evaluationThread: typeof EvaluationThread;
    });
    const network = new Network([1, 28, 28], mlp256.layers);
    network.initialize(seededRandom(5));
    model = exportOnnx(network, 'mlp256', 'test');
    const digits = loadMnist();
    mkdirSync(join(dir, 'data'), { recursive: true });
    const file = join(dir, 'data', 'client.csv');
    writeFileSync(file, writeDatasetCsv(digits.train, [...Array(300).keys()]));
    source = { url: pathToFileURL(file).href, format: 'csv', maxBytes: 1 << 26 };
  }, 180_000);
  afterAll(async () => {
    await Promise.all(opened.map((t) => t.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  const start = (nice: number) => {
    const training = threadTraining({ source, nice, log: capturedTelemetry('fl-trainer').log });
    opened.push(training);
    return training;
  };

  it('trains the same weights as the caller thread, on a thread at the niceness asked', async () => {
    const before = threadNiceness();
    expect(before).not.toContain(7);
    const threaded = start(7);
    let ticks = 0;
    const ticking = setInterval(() => (ticks += 1), 1);
    const trained = await threaded.run(model, training, new AbortController().signal);
    clearInterval(ticking);
    // This thread ran its timers while the round trained on the other one.
    expect(ticks).toBeGreaterThan(0);
    expect(threadNiceness()).toContain(7);
    expect(threadNiceness().filter((n) => n === 0).length).toBeGreaterThan(0);
    const here = await inThreadTraining({ read: readDataset, source }).run(
      model,
      training,
      new AbortController().signal,
    );
    expect(trained.samples).toBe(300);
    expect(trained.loss).toBe(here.loss);
    expect(Buffer.from(trained.encoded).equals(Buffer.from(here.encoded))).toBe(true);
  });

  it("writes a round's update into the memory of the last one released, never of one still held", async () => {
    const threaded = start(8);
    const signal = new AbortController().signal;
    const first = await threaded.run(model, training, signal);
    const kept = Buffer.from(first.encoded);
    // Not released (its update still being sent): the next round's is written elsewhere.
    const second = await threaded.run(model, { ...training, seed: 4 }, signal);
    expect(second.encoded.buffer).not.toBe(first.encoded.buffer);
    expect(Buffer.from(first.encoded).equals(kept)).toBe(true);
    threaded.release(second);
    const third = await threaded.run(model, training, signal);
    // The released memory holds the third round's update, which is the first's (same seed).
    expect(Buffer.from(second.encoded).equals(kept)).toBe(true);
    expect(Buffer.from(third.encoded).equals(kept)).toBe(true);
  });

  it('stops a superseded round with its reason, and trains the next one on a new thread', async () => {
    const threaded = start(9);
    const long = { ...training, epochs: 200 };
    const abort = new AbortController();
    const superseded = threaded.run(model, long, abort.signal);
    await expect.poll(threadNiceness).toContain(9);
    abort.abort(new Error('round 3 started'));
    await expect(superseded).rejects.toThrow('round 3 started');
    await expect.poll(threadNiceness).not.toContain(9);
    const next = await threaded.run(model, training, new AbortController().signal);
    expect(next.samples).toBe(300);
  });

  it('fails a round on a model it cannot rebuild with the model exit code', async () => {
    const threaded = start(5);
    await expect(
      threaded.run(new Uint8Array([1, 2, 3]), training, new AbortController().signal),
    ).rejects.toMatchObject({ name: 'RoundFailure', exitCode: 3 });
  });

  it("fails a round whose Dataset the thread cannot read with the Dataset's exit code", async () => {
    const missing = { ...source, url: pathToFileURL(join(dir, 'data', 'missing.csv')).href };
    const training2 = threadTraining({
      source: missing,
      nice: 4,
      log: capturedTelemetry('fl-trainer').log,
    });
    opened.push(training2);
    await expect(
      training2.run(model, training, new AbortController().signal),
    ).rejects.toMatchObject({ name: 'RoundFailure', exitCode: 2 });
  });

  it("evaluates on a thread at its niceness with the caller thread's figures; a bad model is refused, the thread kept", async () => {
    const split = await readDataset(source);
    const evaluator = evaluationThread({ split, nice: 6, log: capturedTelemetry('fl').log });
    try {
      const threaded = await evaluator.evaluate(model);
      expect(threadNiceness()).toContain(6);
      expect(threaded).toEqual(await evaluateOnnx(model, split));
      await expect(evaluator.evaluate(new Uint8Array([1, 2, 3]))).rejects.toThrow();
      expect(await evaluator.evaluate(model)).toEqual(threaded);
    } finally {
      await evaluator.close();
    }
  });
});
