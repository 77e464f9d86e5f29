/**
 * A job's rounds as the control plane reads them: the round store's state, history and worker
 * records, in the shape reconcile-tick's FederatedProgress port takes. Read-only.
 */
import { roundSummary } from '../messages/federated.js';
import type { RedisClient } from '../redis/index.js';
import { createRoundStore } from './round-store.js';

/** What reconcile-tick shows of a job: its status, latest model, history and workers. */
async function readProgress(redis: RedisClient, job: string) {
  const store = createRoundStore(redis, job);
  const [state, history, workers] = await Promise.all([
    store.state(),
    store.history(),
    store.workers(),
  ]);
  if (state === undefined) return undefined;
  return {
    status: state.status,
    ...(state.message === undefined ? {} : { message: state.message }),
    version: state.version,
    sha: state.sha,
    // An entry that is not a round summary (a store written by hand, a future field) is left out
    // rather than keeping the job's status from being written.
    history: history.flatMap((line) => {
      const parsed = roundSummary.safeParse(safeJson(line));
      return parsed.success ? [parsed.data] : [];
    }),
    workers,
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

export { readProgress };
