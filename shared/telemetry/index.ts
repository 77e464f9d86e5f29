/**
 * Logs and metrics for one function process. A fresh Registry per process (not prom-client's
 * global one) lets tests build several functions side by side without metric name clashes.
 */
import { pino } from 'pino';
import type { DestinationStream, Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Everything a request handler records into. */
interface Telemetry {
  log: Logger;
  registry: Registry;
  /** Counts one finished request: `kind` is the CloudEvent type, route or endpoint. */
  observe(kind: string, status: number, seconds: number): void;
}

interface TelemetryOptions {
  functionName: string;
  level: string;
  /** Where log lines go; stdout unless a test or benchmark passes its own stream. */
  destination?: DestinationStream;
  /** Process-wide metrics (CPU, heap, event-loop lag); off in tests that build many registries. */
  processMetrics?: boolean;
}

/** Builds the logger and the request metrics for one function. */
function createTelemetry(options: TelemetryOptions): Telemetry {
  const log = pino(
    {
      level: options.level,
      base: { fn: options.functionName },
      // Credentials must never reach the log, whatever a handler chooses to log.
      redact: ['req.headers.authorization', 'headers.authorization', '*.token', '*.password'],
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  );
  const registry = new Registry();
  registry.setDefaultLabels({ function: options.functionName });
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'edgeai_requests_total',
    help: 'Requests answered, by CloudEvent type or route and HTTP status',
    labelNames: ['kind', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'edgeai_request_duration_seconds',
    help: 'Time from request start to answer, by CloudEvent type or route',
    labelNames: ['kind'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  // Label-bound children are cached: resolving labels costs more than the increment itself, and
  // the label sets are few (kinds are declared types and routes, statuses a handful).
  const counters = new Map<string, Counter.Internal>();
  const histograms = new Map<string, Histogram.Internal<'kind'>>();
  return {
    log,
    registry,
    observe(kind, status, seconds) {
      const key = `${kind} ${status}`;
      let counter = counters.get(key);
      if (counter === undefined) {
        counter = requests.labels({ kind, status: String(status) });
        counters.set(key, counter);
      }
      counter.inc();
      let histogram = histograms.get(kind);
      if (histogram === undefined) {
        histogram = duration.labels({ kind });
        histograms.set(kind, histogram);
      }
      histogram.observe(seconds);
    },
  };
}

/**
 * A function's own metrics, registered on its telemetry's registry (so prom-client stays behind
 * this one file). Label values are whatever the caller passes: keep them to small fixed sets.
 */
function defineMetrics(telemetry: Pick<Telemetry, 'registry'>) {
  const registers = [telemetry.registry];
  return {
    counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []) {
      const metric = new Counter({ name, help, labelNames, registers });
      return (labels: Partial<Record<L, string>> = {}, value = 1) => metric.inc(labels, value);
    },
    histogram<L extends string>(
      name: string,
      help: string,
      buckets: number[],
      labelNames: readonly L[] = [],
    ) {
      const metric = new Histogram({ name, help, labelNames, buckets, registers });
      return (labels: Partial<Record<L, string>>, value: number) => metric.observe(labels, value);
    },
    /** A gauge read when scraped. */
    gauge(name: string, help: string, read: () => number) {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    },
  };
}

export { createTelemetry, defineMetrics };
export type { Telemetry, Logger };
