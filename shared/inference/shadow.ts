/**
 * Shadow sampling: a share of the samples the edge answered also goes to the cloud, after the
 * answer has left, so the edge learns how often its confident answers differ from the cloud's.
 * It never adds latency (the caller does not wait), and it is capped: at most `maxInFlight`
 * shadow calls at once, a sample drawn while the cap is reached is skipped and counted as such,
 * so a slow or failing cloud costs some evidence, never memory or answers.
 */

interface ShadowOptions {
  /** Share of edge-answered samples shadowed, in [0, 1]. */
  rate: number;
  maxInFlight: number;
  /** Uniform in [0, 1); injectable for tests. */
  random?: () => number;
  /** Shadow calls by outcome, for the metrics. */
  onOutcome?: (outcome: 'ok' | 'failed' | 'skipped', rows: number) => void;
}

interface Shadow {
  /** The rows of `candidates` drawn for shadowing. */
  draw(candidates: readonly number[]): number[];
  /** Starts `call` in the background unless the cap is reached; says whether it started. */
  start(rows: number, call: () => Promise<void>): boolean;
  /** Resolves when every started call has finished (for shutdown and tests). */
  idle(): Promise<void>;
}

function createShadow(options: ShadowOptions): Shadow {
  const random = options.random ?? Math.random;
  const running = new Set<Promise<void>>();
  return {
    draw(candidates) {
      if (options.rate <= 0) return [];
      return candidates.filter(() => random() < options.rate);
    },
    start(rows, call) {
      if (running.size >= options.maxInFlight) {
        options.onOutcome?.('skipped', rows);
        return false;
      }
      const done: Promise<void> = call().then(
        () => options.onOutcome?.('ok', rows),
        () => options.onOutcome?.('failed', rows),
      );
      const tracked = done.finally(() => running.delete(tracked));
      running.add(tracked);
      return true;
    },
    async idle() {
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
}

export { createShadow };
export type { Shadow, ShadowOptions };
