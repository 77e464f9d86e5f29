/**
 * The inference pool heals, with real worker threads, real onnxruntime and the committed models:
 * threads stopped from outside or crashing under concurrent load are replaced, the requests they
 * held are answered 503 at once and nothing else fails; a thread that cannot start is retried
 * with growing pauses while requests are refused at once; every request settles by its
 * deadline; a joined run that fails is retried request by request, so only the request that
 * caused it fails (400 when onnxruntime refused its input, 500 when the failure is not the
 * input's).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { UnavailableError, ValidationError } from '../../../shared/errors/index.js';
import { threadsReadiness } from '../../../shared/inference/definition.js';
import { loadOnnxModel, startOnnxWorker } from '../../../shared/inference/onnx-runtime.js';
import type { OnnxThread } from '../../../shared/inference/onnx-runtime.js';
import { createInferencePool } from '../../../shared/inference/pool.js';
import type { ServingPool, ThreadEvent } from '../../../shared/inference/pool.js';
import { loadMnist, pixels } from '../../../shared/training/data.js';
import { gatherModel, tableRow } from './gather-model.js';

const models = new URL('../../../models/', import.meta.url);
const edgeModel = new Uint8Array(readFileSync(new URL('edge.onnx', models)));
const cloudModel = new Uint8Array(readFileSync(new URL('cloud.onnx', models)));
const { test: digits } = loadMnist();

/** Digits `from` to `from + rows` as the models' input. */
const input = (from: number, rows: number) => ({
  input: {
    datatype: 'FP32' as const,
    shape: [rows, pixels],
    data: digits.x.slice(from * pixels, (from + rows) * pixels),
  },
});
const probabilities = (out: Record<string, { data: unknown }>) =>
  out['probabilities']!.data as Float32Array;
/** Matchers for `values` to 5 decimals. */
const near = (values: ArrayLike<number>) =>
  Array.from(values, (v) => expect.closeTo(v, 5) as unknown);

/** Threads started through the pool, with the ones still running. */
function watchedThreads(start: (model: Uint8Array) => Promise<OnnxThread> = startOnnxWorker) {
  const all: OnnxThread[] = [];
  return {
    all,
    running: () => all.filter((thread) => thread.worker.threadId >= 0),
    async start(model: Uint8Array) {
      const thread = await start(model);
      all.push(thread);
      return thread;
    },
  };
}

/** Polls `condition` every 10 ms for at most `withinMs`. */
async function until(condition: () => boolean, withinMs = 10_000): Promise<void> {
  const end = Date.now() + withinMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}

/** Resolves with the first event `accept` takes. */
function eventWaiter(events: ThreadEvent[]) {
  const waiters: Array<{ accept: (e: ThreadEvent) => boolean; resolve: () => void }> = [];
  return {
    record(event: ThreadEvent) {
      events.push(event);
      for (const waiter of [...waiters]) {
        if (!waiter.accept(event)) continue;
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    },
    next: (accept: (e: ThreadEvent) => boolean) =>
      new Promise<void>((resolve) => waiters.push({ accept, resolve })),
  };
}

describe('inference pool under thread failures', () => {
  it('replaces threads stopped or crashing under concurrent load: only what they held fails, with a 503, and the pool recovers', async () => {
    const direct = await loadOnnxModel(edgeModel);
    const reference = await direct.run(digits.x.subarray(0, 1000 * pixels), 1000);
    await direct.close();
    const events: ThreadEvent[] = [];
    const threads = watchedThreads();
    const pool = await createInferencePool({
      model: edgeModel,
      threads: 2,
      maxBatch: 64,
      maxQueueRows: 1 << 16,
      maxWaitMs: 0,
      deadlineMs: 10_000,
      startThread: (model) => threads.start(model),
      onThreadEvent: (event) => events.push(event),
    });
    const killed = new Set<OnnxThread>();
    const wanted = 12;
    let settled = 0;
    let served = 0;
    const failures: unknown[] = [];
    /** Every 30 answers, one live thread dies: stopped from outside, or an uncaught error in it. */
    const killOne = () => {
      const thread = threads.running().find((t) => !killed.has(t));
      if (thread === undefined) return;
      killed.add(thread);
      // An uncaught exception in the thread, at its next message: `null` is not a run.
      if (killed.size % 2 === 0) thread.worker.postMessage(null);
      else void thread.stop();
    };
    const client = async (seed: number) => {
      for (let i = 0; killed.size < wanted; i += 1) {
        const rows = (seed + i) % 3 === 0 ? 16 : 1;
        const from = (seed * 97 + i * 13) % (1000 - rows);
        const out = await pool
          .infer(input(from, rows), rows)
          .then(probabilities, (err: unknown) => {
            failures.push(err);
            return undefined;
          });
        if (out !== undefined) {
          // Answered: with its own rows, whatever died around it.
          expect(Array.from(out)).toEqual(near(reference.subarray(from * 10, (from + rows) * 10)));
          served += 1;
        }
        settled += 1;
        if (settled % 30 === 0) killOne();
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, seed) => client(seed)));

    await until(() => events.filter((e) => e.kind === 'died').length === wanted);
    expect(served).toBeGreaterThan(0);
    // Every failure is a retryable 503 for a request a dying thread held, or one refused while
    // no thread was alive: none was left to its deadline, none was an answer gone wrong.
    for (const err of failures) {
      expect(err).toBeInstanceOf(UnavailableError);
      expect(String(err)).toMatch(
        /inference thread running this request stopped|no inference thread is alive/,
      );
      expect(String(err)).not.toMatch(/deadline/);
    }
    const heldByDead = events
      .filter((e) => e.kind === 'died')
      .reduce((n, e) => n + (e.kind === 'died' ? e.heldRequests : 0), 0);
    const stopped = failures.filter((err) => /stopped/.test(String(err))).length;
    expect(stopped).toBe(heldByDead);
    expect(heldByDead).toBeGreaterThan(0);

    // Recovered: both threads alive again, and every request answered right.
    await until(() => pool.health().alive === 2);
    const after = await Promise.all(
      Array.from({ length: 50 }, (_, i) => pool.infer(input(i * 4, 4), 4).then(probabilities)),
    );
    after.forEach((out, i) => {
      for (let k = 0; k < 40; k += 1) expect(out[k]).toBeCloseTo(reference[i * 40 + k]!, 5);
    });
    await expect(threadsReadiness(pool).check()).resolves.toBeUndefined();
    await pool.close();
  });

  it('answers a request held by a thread that errors with a 503 at once, is not ready until the replacement starts, then serves', async () => {
    const threads = watchedThreads();
    const events: ThreadEvent[] = [];
    const pool = await createInferencePool({
      model: edgeModel,
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 4096,
      maxWaitMs: 0,
      // Far past the test's own timeout: a request left to its deadline fails the test.
      deadlineMs: 120_000,
      startThread: (model) => threads.start(model),
      onThreadEvent: (event) => events.push(event),
    });
    await pool.infer(input(0, 1), 1);
    const [thread] = threads.all;
    const readiness: Array<Promise<unknown>> = [];
    // Runs right after the pool's own listener: the pool has no thread alive at this moment.
    thread!.worker.once('error', () => {
      expect(pool.health()).toMatchObject({ alive: 0, serving: 0, restarting: 1 });
      readiness.push(
        threadsReadiness(pool)
          .check()
          .catch((err: unknown) => err),
      );
    });
    // The thread takes `null` before the run posted after it: it dies holding the request.
    thread!.worker.postMessage(null);
    const held = pool.infer(input(1, 1), 1);
    await expect(held).rejects.toThrow(UnavailableError);
    await expect(held).rejects.toThrow(/inference thread running this request stopped \(error: /);
    expect(String(await readiness[0])).toMatch(/no inference thread is alive \(1 restarting/);
    // Sent while the replacement loads: it waits for it.
    expect(probabilities(await pool.infer(input(2, 1), 1))).toHaveLength(10);
    expect(events.map((e) => e.kind)).toEqual(['died', 'replaced']);
    await pool.close();
  });

  it('replaces a thread terminated while idle', async () => {
    const threads = watchedThreads();
    const pool = await createInferencePool({
      model: edgeModel,
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 4096,
      maxWaitMs: 0,
      startThread: (model) => threads.start(model),
    });
    await pool.infer(input(0, 1), 1);
    // Idle, outside onnxruntime: a plain terminate is safe.
    await threads.all[0]!.worker.terminate();
    expect(probabilities(await pool.infer(input(0, 1), 1))).toHaveLength(10);
    expect(threads.all).toHaveLength(2);
    await pool.close();
  });

  it('pauses longer after each failed start, refusing requests at once meanwhile, and recovers', async () => {
    let failing = 0;
    const threads = watchedThreads(async (model) => {
      if (failing > 0) {
        failing -= 1;
        throw new Error('model does not load: out of memory');
      }
      return startOnnxWorker(model);
    });
    const events: ThreadEvent[] = [];
    const waiter = eventWaiter(events);
    const pool = await createInferencePool({
      model: edgeModel,
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 4096,
      maxWaitMs: 0,
      deadlineMs: 120_000,
      startThread: (model) => threads.start(model),
      onThreadEvent: (event) => waiter.record(event),
    });
    await pool.infer(input(0, 1), 1);
    failing = 2;
    const firstFailure = waiter.next((e) => e.kind === 'start-failed');
    await threads.all[0]!.stop();
    // Queued while the first replacement loads; refused when it fails, not at the deadline.
    const queued = pool.infer(input(0, 1), 1);
    await firstFailure;
    await expect(queued).rejects.toThrow(/no inference thread is alive/);
    const refused = pool.infer(input(0, 1), 1);
    await expect(refused).rejects.toThrow(UnavailableError);
    await expect(refused).rejects.toThrow(/out of memory/);
    await expect(threadsReadiness(pool).check()).rejects.toThrow(/no inference thread is alive/);

    await until(() => pool.health().alive === 1);
    expect(probabilities(await pool.infer(input(0, 1), 1))).toHaveLength(10);
    expect(events).toEqual([
      { kind: 'died', reason: 'exit code 1', heldRequests: 0, restartInMs: 0 },
      { kind: 'start-failed', reason: 'model does not load: out of memory', restartInMs: 250 },
      { kind: 'start-failed', reason: 'model does not load: out of memory', restartInMs: 500 },
      { kind: 'replaced', alive: 1 },
    ]);
    await pool.close();
  });

  it('settles every request by its deadline, drops the late answers, and keeps answering right', async () => {
    const pool: ServingPool = await createInferencePool({
      model: cloudModel,
      threads: 1,
      maxBatch: 256,
      maxQueueRows: 1 << 16,
      maxWaitMs: 0,
      deadlineMs: 20,
    });
    // 40 runs of 256 rows, one after another on one thread: the last ones cannot make 20 ms.
    const outcomes = await Promise.allSettled(
      Array.from({ length: 40 }, () => pool.infer(input(0, 256), 256)),
    );
    const late = outcomes.filter((o) => o.status === 'rejected');
    expect(late.length).toBeGreaterThan(0);
    for (const o of late) {
      expect(o.reason).toBeInstanceOf(UnavailableError);
      expect(String(o.reason)).toMatch(/no answer within the inference deadline of 20 ms/);
    }
    // The runs still going answer into the void; a new request gets its own answer.
    const direct = await loadOnnxModel(cloudModel);
    const expected = await direct.run(digits.x.subarray(5 * pixels, 6 * pixels), 1);
    await direct.close();
    await until(() => pool.queuedRows() === 0 && pool.health().serving === 1);
    let answer: Float32Array | undefined;
    // The thread may still be running a late batch; a fresh one-row request is quick.
    for (let attempt = 0; answer === undefined && attempt < 50; attempt += 1) {
      answer = await pool
        .infer(input(5, 1), 1)
        .then(probabilities)
        .catch(() => undefined);
    }
    expect(Array.from(answer!)).toEqual(near(expected));
    await pool.close();
  });
});

describe('a joined run that fails', () => {
  const index = (...values: number[]) => ({
    index: {
      datatype: 'INT64' as const,
      shape: [values.length],
      data: BigInt64Array.from(values.map(BigInt)),
    },
  });

  it('is retried request by request: only the request onnxruntime refuses gets a 400', async () => {
    const runs: number[] = [];
    const pool = await createInferencePool({
      model: gatherModel(),
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 4096,
      // Long enough for the eight requests below to join in one run.
      maxWaitMs: 50,
      onRun: (rows) => runs.push(rows),
    });
    const values = [0, 1, 2, 99, 4, 5, 6, 7];
    const outcomes = await Promise.allSettled(values.map((v) => pool.infer(index(v), 1)));
    expect(runs[0]).toBe(8);
    expect(runs.slice(1)).toEqual([1, 1, 1, 1, 1, 1, 1, 1]);
    outcomes.forEach((outcome, i) => {
      if (values[i] === 99) {
        expect(outcome.status).toBe('rejected');
        const reason = (outcome as PromiseRejectedResult).reason as Error;
        expect(reason).toBeInstanceOf(ValidationError);
        expect(reason.message).toMatch(/the model could not run on these inputs \(index \[1\]\)/);
        expect(reason.message).toMatch(/out of data bounds/);
        return;
      }
      expect(outcome.status).toBe('fulfilled');
      const rows = (outcome as PromiseFulfilledResult<Record<string, { data: unknown }>>).value;
      expect(Array.from(rows['row']!.data as Float32Array)).toEqual(tableRow(values[i]!));
    });
    // Joining resumes after: the next requests share a run again.
    runs.length = 0;
    await Promise.all([0, 1, 2].map((v) => pool.infer(index(v), 1)));
    expect(runs).toEqual([3]);
    await pool.close();
  });

  it('answers 500 (not 400) to the request whose failure is not its input being refused', async () => {
    const pool = await createInferencePool({
      model: gatherModel(),
      threads: 1,
      maxBatch: 64,
      maxQueueRows: 4096,
      maxWaitMs: 50,
    });
    // Past the parser, a tensor whose data does not fill its shape is this server's bug: the
    // thread cannot even build the feeds.
    const broken = {
      index: { datatype: 'INT64' as const, shape: [1], data: BigInt64Array.from([1n, 2n]) },
    };
    const outcomes = await Promise.allSettled([
      pool.infer(index(3), 1),
      pool.infer(broken, 1),
      pool.infer(index(4), 1),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const reason = (outcomes[1] as PromiseRejectedResult).reason as Error;
    expect(reason).not.toBeInstanceOf(ValidationError);
    expect(reason.message).toMatch(/inference failed while building the feeds/);
    await pool.close();
  });
});
