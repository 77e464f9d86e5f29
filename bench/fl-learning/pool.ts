/**
 * A round's clients trained in parallel on worker threads (bench/fl-learning/worker.ts), one
 * client a job (bench/support/thread-pool.ts). The updates are what the in-process trainer
 * computes (the same localTrain on the same inputs), so a run is bit-identical with any number of
 * threads. The training split is `data`'s (federation.ts digits), which each thread loads itself.
 */
import type { WeightUpdate } from '../../shared/fl/fedavg.js';
import type { LayerSpec } from '../../shared/training/network.js';
import { ThreadPool } from '../support/thread-pool.js';
import type { DataSource } from './settings.js';
import type { TrainRound, TrainTask } from './simulate.js';

/** What a thread is sent: one client of a round. */
interface TrainJob {
  readonly model: Uint8Array;
  readonly task: TrainTask;
}

/** `train` is a TrainRound over the threads; `close` ends them. */
class TrainerPool {
  readonly #threads: ThreadPool<TrainJob, WeightUpdate>;

  constructor(size: number, layers: readonly LayerSpec[], data: DataSource = 'mnist') {
    this.#threads = new ThreadPool(size, new URL('./worker.js', import.meta.url), { layers, data });
  }

  readonly train: TrainRound = (model, tasks) =>
    Promise.all(tasks.map((task) => this.#threads.run({ model, task })));

  close(): Promise<void> {
    return this.#threads.close();
  }
}

export { TrainerPool };
export type { TrainJob };
