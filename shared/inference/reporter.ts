/**
 * The edge worker's reports to upstream-status: its cumulative counters (and, when it measures
 * them, its quality estimates) as a WorkerMessage, every interval while they change (and at
 * least every `heartbeatEvery` intervals), and once more when it stops. Counts are cumulative per
 * reporter (pod and start time), so a lost or repeated report neither loses nor doubles anything
 * upstream. The message, its route and its credentials are upstream-status's contract with the
 * edge (shared/messages/worker-message.ts).
 */
import { workerQuality } from '../crds/schemas.js';
import { createHttpClient, endpoint, succeeded } from '../http/index.js';
import type { HttpSend } from '../http/index.js';
import type { WorkerQuality } from '../crds/index.js';
import { nodeHeader, reportPath } from '../messages/worker-message.js';
import type { WorkerMessage } from '../messages/worker-message.js';
import type { Logger } from '../telemetry/index.js';
import type { WorkerCounters } from './joint.js';

interface ReporterOptions {
  /** upstream-status base URL. */
  url: string;
  namespace: string;
  name: string;
  node: string;
  token: string;
  /** Unique per worker process. */
  reporter: string;
  counters: WorkerCounters;
  /** The edge's current accuracy and drift estimates, if it makes any. */
  quality?: () => WorkerQuality | undefined;
  intervalMs: number;
  heartbeatEvery?: number;
  log: Logger;
  /** How reports go (default: shared/http's node:http client). */
  send?: HttpSend;
}

type Output = NonNullable<WorkerMessage['output']>;

/**
 * The quality estimate, checked with upstream-status's own schema (the CRD's): an estimate out of
 * bounds (a NaN from an empty window, say) would get the whole report refused, and the counters
 * with it, on every retry. A refusal is logged once per distinct reason.
 */
function checkedQuality(options: Pick<ReporterOptions, 'quality' | 'log'>) {
  let refused = '';
  return (): WorkerQuality | undefined => {
    const current = options.quality?.();
    if (current === undefined) return undefined;
    const parsed = workerQuality.safeParse(current);
    if (parsed.success) return parsed.data;
    const reason = parsed.error.issues
      .map((issue) => `${issue.path.map(String).join('.')}: ${issue.message}`)
      .join('; ');
    if (reason !== refused) {
      refused = reason;
      options.log.warn({ reason }, 'quality estimate out of bounds; reported without it');
    }
    return undefined;
  };
}

function snapshot(counters: WorkerCounters, quality: WorkerQuality | undefined): Output {
  const { uploaded, inferenceNumber, hardExampleNumber, shadowNumber } = counters;
  return {
    // shadowNumber only once there is one: a worker that never shadows stays readable by an
    // upstream-status that predates the field (its schema refuses unknown keys).
    taskInfo: {
      uploaded,
      inferenceNumber,
      hardExampleNumber,
      ...(shadowNumber > 0 ? { shadowNumber } : {}),
    },
    ...(quality === undefined ? {} : { quality }),
  };
}

/** One POST to upstream-status; throws unless it answers 2xx within 5 s. */
async function post(
  options: Pick<ReporterOptions, 'node' | 'token'>,
  send: HttpSend,
  url: string,
  message: WorkerMessage,
): Promise<void> {
  const { status } = await send(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      [nodeHeader]: options.node,
      authorization: `Bearer ${options.token}`,
    },
    body: JSON.stringify(message),
    timeoutMs: 5000,
  });
  if (!succeeded(status)) throw new Error(`upstream-status answered ${status}`);
}

function startReporter(options: ReporterOptions) {
  const send = options.send ?? createHttpClient().send;
  const reportUrl = endpoint(options.url, reportPath(options.namespace, options.name));
  const quality = checkedQuality(options);
  let sequence = 0;
  let lastSent = '';
  let quiet = 0;
  const flush = async (force: boolean): Promise<void> => {
    const output = snapshot(options.counters, quality());
    // A changed estimate is news as much as a changed count.
    const text = JSON.stringify(output);
    if (!force && text === lastSent && (quiet += 1) < (options.heartbeatEvery ?? 6)) return;
    sequence += 1;
    try {
      await post(options, send, reportUrl, {
        id: `${options.reporter}-${sequence}`,
        reporter: options.reporter,
        worker: 'edge',
        phase: 'Inference',
        status: 'Running',
        output,
      });
      lastSent = text;
      quiet = 0;
    } catch (err) {
      options.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'status report failed; retried next interval',
      );
    }
  };
  // One report at a time: a slow upstream-status (up to the 5 s timeout) must not have the next
  // interval send the same change again before the first answer says it arrived.
  let inFlight: Promise<void> | undefined;
  const run = (force: boolean): Promise<void> => {
    const next = (inFlight ?? Promise.resolve()).then(() => flush(force));
    inFlight = next;
    void next.finally(() => {
      if (inFlight === next) inFlight = undefined;
    });
    return next;
  };
  const timer = setInterval(() => {
    if (inFlight === undefined) void run(false);
  }, options.intervalMs);
  timer.unref();
  return {
    flush: () => run(true),
    async stop() {
      clearInterval(timer);
      await run(true);
    },
  };
}

export { startReporter };
export type { ReporterOptions };
