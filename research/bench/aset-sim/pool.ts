/**
 * A fixed pool of worker threads for the bench's independent simulations. Jobs queue in the order
 * submitted; each worker takes the next when it finishes, so submitting the longest first keeps
 * both cores busy to the end. With no workers the jobs run in the calling thread.
 */
import { Worker } from 'node:worker_threads';
import { runSimJob } from './jobs.js';
import type { JobResult, SimJob } from './jobs.js';

interface Pending {
  readonly id: number;
  readonly job: SimJob;
  resolve(result: JobResult): void;
  reject(error: Error): void;
}

type Reply = { id: number; result: JobResult } | { id: number; error: string };

/** `run` resolves with the job's result whichever thread ran it; `close` ends the threads. */
class SimPool {
  readonly #workers: Worker[] = [];
  readonly #idle: Worker[] = [];
  readonly #queue: Pending[] = [];
  readonly #running = new Map<Worker, Pending>();
  #nextId = 0;
  #broken: Error | undefined;

  constructor(size: number) {
    for (let i = 0; i < size; i += 1) {
      const worker = new Worker(new URL('./worker.js', import.meta.url));
      worker.on('message', (reply: Reply) => this.#settle(worker, reply));
      // A worker only errors on a bug (job failures come back as replies): fail everything
      // rather than leave queued jobs waiting for a thread that is gone.
      worker.on('error', (error) => this.#fail(error));
      this.#workers.push(worker);
      this.#idle.push(worker);
    }
  }

  run(job: SimJob): Promise<JobResult> {
    if (this.#workers.length === 0) return runSimJob(job);
    if (this.#broken !== undefined) return Promise.reject(this.#broken);
    return new Promise((resolve, reject) => {
      this.#queue.push({ id: this.#nextId++, job, resolve, reject });
      this.#pump();
    });
  }

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
      worker.postMessage({ id: next.id, job: next.job });
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
      else pending.resolve(reply.result);
    }
    this.#pump();
  }
}

export { SimPool };
