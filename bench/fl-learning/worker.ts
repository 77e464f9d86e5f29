/**
 * A worker thread of the fl-learning bench: trains the clients the main thread posts, one at a
 * time, with the in-process trainer over the training digits it loads itself (federation.ts's
 * `digits().train`, the split the main thread partitioned), so a round's clients use both cores.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { LayerSpec } from '../../shared/training/network.js';
import { loadMnist } from '../../shared/training/data.js';
import { asDatasetFile } from './federation.js';
import { inProcessTrainer } from './simulate.js';
import type { TrainJob } from './pool.js';

interface JobMessage {
  readonly id: number;
  readonly job: TrainJob;
}

const port = parentPort;
if (port === null) throw new Error('bench/fl-learning/worker.js must run as a worker thread');
const { layers } = workerData as { layers: LayerSpec[] };
// federation.ts's digits().train, without converting the splits a trainer never reads.
const train = inProcessTrainer(asDatasetFile(loadMnist().train), layers);

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
