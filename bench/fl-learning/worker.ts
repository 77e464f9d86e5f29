/**
 * A worker thread of the fl-learning bench: trains the clients the main thread posts, one at a
 * time, with the in-process trainer over the training digits it loads itself (federation.ts's
 * `digits(data).train`, the split the main thread partitioned), so a round's clients use both
 * cores.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { LayerSpec } from '../../shared/training/network.js';
import { trainingDigits } from './federation.js';
import type { DataSource } from './settings.js';
import { inProcessTrainer } from './simulate.js';
import type { TrainJob } from './pool.js';

interface JobMessage {
  readonly id: number;
  readonly job: TrainJob;
}

const port = parentPort;
if (port === null) throw new Error('bench/fl-learning/worker.js must run as a worker thread');
const { layers, data } = workerData as { layers: LayerSpec[]; data: DataSource };
const train = inProcessTrainer(trainingDigits(data), layers);

port.on('message', (message: JobMessage) => {
  train(message.job.model, [message.job.task]).then(
    ([result]) => port.postMessage({ id: message.id, result }),
    (error: unknown) =>
      port.postMessage({
        id: message.id,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      }),
  );
});
