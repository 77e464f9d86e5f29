/**
 * A fixed pool of worker threads running independent jobs. Jobs queue in the order submitted and
 * an idle thread takes the next, so a slow thread (the machine is shared) holds back no more than
 * one job. The thread at `url` answers each `{ id, job }` with `{ id, result }` or
 * `{ id, error }`; a thread that errors (a bug: a job's failure comes back as a reply) fails every
 * job rather than leave queued ones waiting for a thread that is gone.
 */
import { Worker } from 'node:worker_threads';

interface Pending<Job, Result> {
  readonly id: number;
  readonly job: Job;
  resolve(result: Result): void;
  reject(error: Error): void;
}

type Reply<Result> = { id: number; result: Result } | { id: number; error: string };

class ThreadPool<Job, Result> {
  readonly #workers: Worker[] = [];
  readonly #idle: Worker[] = [];
  readonly #queue: Array<Pending<Job, Result>> = [];
  readonly #running = new Map<Worker, Pending<Job, Result>>();
  #nextId = 0;
  #broken: Error | undefined;

  constructor(size: number, url: URL, workerData?: unknown) {
    for (let i = 0; i < size; i += 1) {
      const worker = new Worker(url, { workerData });
      worker.on('message', (reply: Reply<Result>) => this.#settle(worker, reply));
      worker.on('error', (error) => this.#fail(error));
      this.#workers.push(worker);
      this.#idle.push(worker);
    }
  }

  get size(): number {
    return this.#workers.length;
  }

  run(job: Job): Promise<Result> {
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

  #settle(worker: Worker, reply: Reply<Result>): void {
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

export { ThreadPool };
