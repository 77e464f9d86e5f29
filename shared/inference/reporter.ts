/**
 * The edge worker's reports to upstream-status: its cumulative counters as a WorkerMessage,
 * every interval while they change (and at least every `heartbeatEvery` intervals), and once
 * more when it stops. Counts are cumulative per reporter (pod and start time), so a lost or
 * repeated report neither loses nor doubles anything upstream.
 */
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
  intervalMs: number;
  heartbeatEvery?: number;
  log: Logger;
  send?: typeof fetch;
}

function startReporter(options: ReporterOptions) {
  const send = options.send ?? fetch;
  const endpoint = new URL(
    `${encodeURIComponent(options.namespace)}/jointinferenceservices/${encodeURIComponent(options.name)}/status`,
    options.url.endsWith('/') ? options.url : `${options.url}/`,
  );
  let sequence = 0;
  let lastSent = '';
  let quiet = 0;
  const snapshot = () =>
    JSON.stringify({
      uploaded: options.counters.uploaded,
      inferenceNumber: options.counters.inferenceNumber,
      hardExampleNumber: options.counters.hardExampleNumber,
    });
  const flush = async (force: boolean): Promise<void> => {
    const taskInfo = snapshot();
    if (!force && taskInfo === lastSent && (quiet += 1) < (options.heartbeatEvery ?? 6)) return;
    sequence += 1;
    const message = {
      id: `${options.reporter}-${sequence}`,
      reporter: options.reporter,
      worker: 'edge',
      phase: 'Inference',
      status: 'Running',
      output: { taskInfo: JSON.parse(taskInfo) as Record<string, number> },
    };
    try {
      const response = await send(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-edgeai-node': options.node,
          authorization: `Bearer ${options.token}`,
        },
        body: JSON.stringify(message),
        signal: AbortSignal.timeout(5000),
      });
      if (!response.ok) throw new Error(`upstream-status answered ${response.status}`);
      lastSent = taskInfo;
      quiet = 0;
    } catch (err) {
      options.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'status report failed; retried next interval',
      );
    }
  };
  const timer = setInterval(() => void flush(false), options.intervalMs);
  timer.unref();
  return {
    flush: () => flush(true),
    async stop() {
      clearInterval(timer);
      await flush(true);
    },
  };
}

export { startReporter };
export type { ReporterOptions };
