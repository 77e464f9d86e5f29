/**
 * A fixed pool of worker threads training a round's clients in parallel (bench/fl-learning/
 * worker.ts). Each client is one job; jobs queue in the order given and an idle thread takes the
 * next, so a slow thread (the machine is shared) holds back no more than one client. The updates
 * are what the in-process trainer computes (the same localTrain on the same inputs), so a run is
 * bit-identical with any number of threads. The training split is the `mnist` package's, which
 * each thread loads itself.
 */
import { Worker } from 'node:worker_threads';
import type { WeightUpdate } from '../../shared/fl/fedavg.js';
import type { LayerSpec } from '../../shared/training/network.js';
import type { TrainRound, TrainTask } from './simulate.js';

interface Pending {
  readonly id: number;
  readonly model: Uint8Array;
  readonly task: TrainTask;
  resolve(update: WeightUpdate): void;
  reject(error: Error): void;
}

type Reply = { id: number; update: WeightUpdate } | { id: number; error: string };

/** `train` is a TrainRound over the threads; `close` ends them. */
class TrainerPool {
  readonly #workers: Worker[] = [];
  readonly #idle: Worker[] = [];
  readonly #queue: Pending[] = [];
  readonly #running = new Map<Worker, Pending>();
  #nextId = 0;
  #broken: Error | undefined;

  constructor(size: number, layers: readonly LayerSpec[]) {
    for (let i = 0; i < size; i += 1) {
      const worker = new Worker(new URL('./worker.js', import.meta.url), {
        workerData: { layers },
      });
      worker.on('message', (reply: Reply) => this.#settle(worker, reply));
      // A thread errors only on a bug (a job's failure comes back as a reply): fail everything
      // rather than leave queued clients waiting for a thread that is gone.
      worker.on('error', (error) => this.#fail(error));
      this.#workers.push(worker);
      this.#idle.push(worker);
    }
  }

  readonly train: TrainRound = (model, tasks) =>
    Promise.all(
      tasks.map(
        (task) =>
          new Promise<WeightUpdate>((resolve, reject) => {
            if (this.#broken !== undefined) return reject(this.#broken);
            this.#queue.push({ id: this.#nextId++, model, task, resolve, reject });
            this.#pump();
          }),
      ),
    );

  async close(): Promise<void> {
    await Promise.all(this.#workers.map((w) => w.terminate()));
  }

  #pump(): void {
    for (;;) {
      const worker = this.#idle.pop();
      if (worker === undefined) return;
      const next = this.#queue.shift();
      if (next === undefined) {
        this.#idle.push(worker);
        return;
      }
      this.#running.set(worker, next);
      worker.postMessage({ id: next.id, model: next.model, task: next.task });
    }
  }

  #fail(error: Error): void {
    this.#broken = error;
    for (const pending of [...this.#running.values(), ...this.#queue.splice(0)]) {
      pending.reject(error);
    }
    this.#running.clear();
    this.#idle.length = 0;
  }

  #settle(worker: Worker, reply: Reply): void {
    const pending = this.#running.get(worker);
    this.#running.delete(worker);
    this.#idle.push(worker);
    if (pending !== undefined) {
      if ('error' in reply) pending.reject(new Error(reply.error));
      else pending.resolve(reply.update);
    }
    this.#pump();
  }
}

export { TrainerPool };
