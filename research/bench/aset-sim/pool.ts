/**
 * A fixed pool of worker threads for the bench's independent simulations
 * (bench/support/thread-pool.ts): submitting the longest first keeps both cores busy to the end.
 * With no workers the jobs run in the calling thread.
 */
import { ThreadPool } from '../../../bench/support/thread-pool.js';
import { runSimJob } from './jobs.js';
import type { JobResult, SimJob } from './jobs.js';

/** `run` resolves with the job's result whichever thread ran it; `close` ends the threads. */
class SimPool {
  readonly #threads: ThreadPool<SimJob, JobResult>;

  constructor(size: number) {
    this.#threads = new ThreadPool(size, new URL('./worker.js', import.meta.url));
  }

  run(job: SimJob): Promise<JobResult> {
    return this.#threads.size === 0 ? runSimJob(job) : this.#threads.run(job);
  }

  close(): Promise<void> {
    return this.#threads.close();
  }
}

export { SimPool };
