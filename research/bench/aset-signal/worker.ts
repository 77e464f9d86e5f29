/**
 * A worker thread of the aset-signal bench: the deviation trials of its share of the seeds, posted
 * back as plain data (the main thread fits and reports).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { collect } from './collect.js';
import type { CollectJob } from './collect.js';

const port = parentPort;
if (port === null)
  throw new Error('research/bench/aset-signal/worker.js must run as a worker thread');
collect(workerData as CollectJob).then(
  (trials) => port.postMessage({ trials }),
  (error: unknown) =>
    port.postMessage({
      error: error instanceof Error ? (error.stack ?? error.message) : String(error),
    }),
);
