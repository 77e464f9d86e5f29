/** The simulations of the aset-signal bench, as a job a worker thread or the main thread runs. */
import { Worker } from 'node:worker_threads';
import { deviationTrials } from '../../aset/sim/oracle.js';
import type { DeviationTrial } from '../../aset/sim/oracle.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { optionsFor } from '../aset-sim/jobs.js';
import type { Load, TopologyName } from '../aset-sim/jobs.js';

interface CollectJob {
  readonly topology: TopologyName;
  readonly seeds: readonly number[];
  readonly load: Load;
  /** Each base policy's path is deviated from in turn. */
  readonly bases: readonly PolicyName[];
  readonly decisions: readonly number[];
  readonly horizonWindows: number;
}

interface SeedTrials {
  readonly seed: number;
  readonly base: PolicyName;
  readonly trials: DeviationTrial[];
}

async function collect(job: CollectJob): Promise<SeedTrials[]> {
  const out: SeedTrials[] = [];
  for (const seed of job.seeds) {
    const options = await optionsFor({ topology: job.topology, seed, load: job.load });
    for (const base of job.bases) {
      out.push({ seed, base, trials: deviationTrials(options, { ...job, base }) });
    }
  }
  return out;
}

/** Runs `job` in a new worker thread (the bench's seeds split across them use both cores). */
function collectInThread(job: CollectJob): Promise<SeedTrials[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: job });
    worker.once('message', (reply: { trials: SeedTrials[] } | { error: string }) => {
      void worker.terminate();
      if ('error' in reply) reject(new Error(reply.error));
      else resolve(reply.trials);
    });
    worker.once('error', reject);
  });
}

export { collect, collectInThread };
export type { CollectJob, SeedTrials };
