/** A background job of a worker: the window refreshes and the task poll. */
import type { Logger } from '../telemetry/index.js';

/**
 * Runs `work` every `ms` (never when `ms` is 0) without keeping the process alive; a failure is
 * logged as `failure` and the next run goes on (the caller keeps its last good state). Returns the
 * stop.
 */
function repeat(
  ms: number,
  work: () => Promise<unknown>,
  log: Logger,
  failure: string,
): () => void {
  if (ms <= 0) return () => {};
  const timer = setInterval(() => {
    work().catch((err: unknown) =>
      log.warn({ err: err instanceof Error ? err.message : String(err) }, failure),
    );
  }, ms);
  timer.unref();
  return () => clearInterval(timer);
}

export { repeat };
