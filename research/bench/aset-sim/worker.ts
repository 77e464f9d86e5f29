/**
 * A worker thread of the aset-sim bench: runs the jobs the main thread posts, one at a time, so
 * independent seed-runs use both cores while the main thread drives the ASET runs.
 */
import { parentPort } from 'node:worker_threads';
import { runSimJob } from './jobs.js';
import type { SimJob } from './jobs.js';

interface JobMessage {
  readonly id: number;
  readonly job: SimJob;
}

const port = parentPort;
if (port === null) throw new Error('research/bench/aset-sim/worker.js must run as a worker thread');

port.on('message', (message: JobMessage) => {
  runSimJob(message.job).then(
    (result) => port.postMessage({ id: message.id, result }),
    (error: unknown) =>
      port.postMessage({
        id: message.id,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      }),
  );
});
