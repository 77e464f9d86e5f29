/**
 * Offload-budget mode: instead of a fixed threshold, the edge sends to the cloud the samples
 * whose hardness is above the (1 - target) quantile of recent hardness scores, so the share of
 * offloaded samples (the cloud bill) holds when the input drifts. Every replica adds what it saw
 * to one window in Redis and reads the cut from that window, so the replicas of a service agree.
 * Until a window exists the miner's own threshold decides.
 */
// By file, not the domain's index: the index loads ioredis, which a worker without Redis never needs.
import { runScript } from '../redis/client.js';
import type { RedisClient } from '../redis/client.js';
import { hashTag, key } from '../redis/keys.js';
import { addScores } from './lua/index.js';
import { repeat } from './repeat.js';
import type { Logger } from '../telemetry/index.js';

interface Budget {
  /** The current cut, or undefined while there is no window yet. */
  cut(): number | undefined;
  /** Hard when above the cut (undefined: let the miner decide). */
  isHard(hardness: number): boolean | undefined;
  /** Records scores for the next refresh. */
  observe(hardness: number): void;
  /** Sends the recorded scores and reads the shared window's cut. */
  refresh(): Promise<void>;
  stop(): void;
}

interface BudgetOptions {
  redis: RedisClient | undefined;
  /** The service (`<namespace>/<name>`): replicas of one service share a window. */
  service: string;
  /** Share of samples to offload, in [0, 1]. */
  target: number;
  /** Scores the shared window keeps. */
  window: number;
  /** How often a replica sends its scores and reads the cut (0: only when refresh is called). */
  refreshMs: number;
  log: Logger;
}

/** The value with a share `q` of `values` at or below it (nearest rank). */
function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

function createBudget(options: BudgetOptions): Budget {
  const pending: number[] = [];
  const local: number[] = [];
  let cut: number | undefined;
  const windowKey = key('budget', hashTag(options.service), 'hardness');
  const fromWindow = (values: readonly number[]) => {
    // Enough scores to place the quantile; a cut from a handful would swing wildly.
    if (values.length >= Math.min(options.window, 100)) cut = quantile(values, 1 - options.target);
  };
  const refresh = async () => {
    const scores = pending.splice(0);
    if (options.redis === undefined) {
      local.push(...scores);
      local.splice(0, Math.max(0, local.length - options.window));
      fromWindow(local);
      return;
    }
    const values = await runScript(
      options.redis,
      addScores,
      [windowKey, String(options.window), ...scores.map((s) => s.toFixed(6))],
      (reply) => (reply as string[]).map(Number),
    );
    fromWindow(values);
  };
  const stop = repeat(
    options.refreshMs,
    refresh,
    options.log,
    'budget refresh failed; keeping the last cut',
  );
  return {
    cut: () => cut,
    isHard: (hardness) => (cut === undefined ? undefined : hardness > cut),
    observe(hardness) {
      // Bounded: a Redis outage must not grow memory without limit.
      if (pending.length < options.window) pending.push(hardness);
    },
    refresh,
    stop,
  };
}

export { createBudget, quantile };
export type { Budget, BudgetOptions };
