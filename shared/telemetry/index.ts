/**
 * Logs and metrics for one function process. A fresh Registry per process (not prom-client's
 * global one) lets tests build several functions side by side without metric name clashes.
 *
 * prom-client (with what it loads: OpenTelemetry's API, its push gateway's https and zlib,
 * cluster) is loaded when metrics are first used, not at start: on the first request answered,
 * the first scrape, or a second after start, whichever comes first. Until then the metrics a
 * function defines and what it records are kept, in order, and applied once it has loaded, so
 * nothing is lost; a scrape waits for the load. Loading it cost a worker about 15 ms of its
 * HTTP thread's CPU before its first prediction (docs/benchmarks.md, the edge worker).
 */
import { pino } from 'pino';
import type { DestinationStream, Logger } from 'pino';
import type * as Prom from 'prom-client';
import type * as PromModule from './prom.js';

type PromClient = typeof PromModule;

/** Everything a request handler records into. */
interface Telemetry {
  log: Logger;
  /** Counts one finished request: `kind` is the CloudEvent type, route or endpoint. */
  observe(kind: string, status: number, seconds: number): void;
  /**
   * A request's one log line at info, message `request`: `log.info(fields, 'request')`, the
   * same line byte for byte, built directly (see `requestLine`).
   */
  logRequest(fields: Readonly<Record<string, string | number | undefined>>): void;
  /** The registry's metrics in Prometheus' text format, and its content type (GET /metrics). */
  scrape(): Promise<{ contentType: string; body: string }>;
  /** Runs `use` with prom-client and this function's registry once loaded (at once if it is). */
  withRegistry(use: (prom: PromClient, registry: Prom.Registry) => void): void;
}

interface TelemetryOptions {
  functionName: string;
  level: string;
  /** Where log lines go; stdout unless a test or benchmark passes its own stream. */
  destination?: DestinationStream;
  /** Process-wide metrics (CPU, heap, event-loop lag); off in tests that build many registries. */
  processMetrics?: boolean;
}

/**
 * Log lines are written to stdout in batches: once `batchBytes` have gathered (some 15 request
 * lines), or `flushMs` after the first line of a batch. One write per line cost the HTTP thread a
 * write call per request (8% of its time under batch-64 load: the call, and the thread-pool round
 * trip that completes it); a line waits at most `flushMs`. Whatever is buffered is written when
 * the process exits, a crash's exit included (pino flushes its destination synchronously on exit).
 */
const batchBytes = 4096;
const flushMs = 100;

/**
 * stdout (or `dest`) in batches (above). The flush is timed from a batch's first line, not on a period:
 * sonic-boom's periodicFlush writes even when it holds nothing (an empty write through the thread
 * pool), ten wake-ups a second in a function that is idle, beside whatever the node runs.
 */
function batchedLines(dest: number | string = 1): DestinationStream {
  const stream = pino.destination({ dest, sync: false, minLength: batchBytes });
  const write = stream.write.bind(stream);
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    timer = undefined;
    try {
      stream.flush();
    } catch {
      // Closed as the process exits, its lines written synchronously: nothing left to flush.
    }
  };
  stream.write = (line: string) => {
    const written = write(line);
    if (timer === undefined) {
      timer = setTimeout(flush, flushMs);
      timer.unref();
    }
    return written;
  };
  return stream;
}

/**
 * `log.info(fields, 'request')` for the flat fields of a request's line (strings and numbers),
 * written as pino writes it — level, time, the logger's bindings (pre-serialised once), the
 * fields in order (undefined ones left out), the message — without going through pino's
 * per-field path: with a wildcard in `redact`, pino runs its redaction on every field of every
 * line, where a string or a number has nothing to redact. Lines of any other shape, and every
 * other level, go through pino.
 */
function requestLine(log: Logger, destination: DestinationStream) {
  const bindings = (log as unknown as Record<symbol, string>)[pino.symbols.chindingsSym] ?? '';
  const keys = new Map<string, string>();
  const info = pino.levels.values['info'];
  return (fields: Readonly<Record<string, string | number | undefined>>): void => {
    if (!log.isLevelEnabled('info')) return;
    let line = `{"level":${info},"time":${Date.now()}${bindings}`;
    for (const key in fields) {
      const value = fields[key];
      if (value === undefined) continue;
      let name = keys.get(key);
      if (name === undefined) {
        name = `,${JSON.stringify(key)}:`;
        keys.set(key, name);
      }
      const text =
        typeof value === 'string'
          ? JSON.stringify(value)
          : Number.isFinite(value)
            ? String(value)
            : 'null';
      line += name + text;
    }
    destination.write(`${line},"msg":"request"}\n`);
  };
}

/** How long after start prom-client loads at the latest (see the file comment). */
const loadMetricsAfterMs = 1000;

let promClient: Promise<PromClient> | undefined;

/** prom-client, imported once per process. */
function importPromClient(): Promise<PromClient> {
  promClient ??= import('./prom.js');
  return promClient;
}

/**
 * One function's registry, made when prom-client has loaded; what is asked of it before then
 * waits in `waiting`, in order.
 */
class LazyRegistry {
  private loaded: { prom: PromClient; registry: Prom.Registry } | undefined;
  private loading: Promise<{ prom: PromClient; registry: Prom.Registry }> | undefined;
  private readonly waiting: Array<(prom: PromClient, registry: Prom.Registry) => void> = [];

  constructor(
    private readonly setUp: (prom: PromClient) => Prom.Registry,
    private readonly onError: (err: unknown) => void,
  ) {
    setTimeout(() => this.start(), loadMetricsAfterMs).unref();
  }

  use(action: (prom: PromClient, registry: Prom.Registry) => void): void {
    if (this.loaded !== undefined) action(this.loaded.prom, this.loaded.registry);
    else this.waiting.push(action);
  }

  /** Starts the load, if not started: a failure is reported, never thrown. */
  start(): void {
    if (this.loaded === undefined) this.load().catch(this.onError);
  }

  /** Loads prom-client (once), makes the registry, then applies what waited. */
  load(): Promise<{ prom: PromClient; registry: Prom.Registry }> {
    this.loading ??= importPromClient().then((prom) => {
      const registry = this.setUp(prom);
      this.loaded = { prom, registry };
      for (const action of this.waiting.splice(0)) {
        try {
          action(prom, registry);
        } catch (err) {
          this.onError(err);
        }
      }
      return this.loaded;
    });
    return this.loading;
  }
}

/** Builds the logger and the request metrics for one function. */
function createTelemetry(options: TelemetryOptions): Telemetry {
  const destination = options.destination ?? batchedLines();
  const log = pino(
    {
      level: options.level,
      base: { fn: options.functionName },
      // Credentials must never reach the log, whatever a handler chooses to log.
      redact: ['req.headers.authorization', 'headers.authorization', '*.token', '*.password'],
    },
    destination,
  );
  // Label-bound children are cached: resolving labels costs more than the increment itself, and
  // the label sets are few (kinds are declared types and routes, statuses a handful).
  const counters = new Map<string, Prom.Counter.Internal>();
  const histograms = new Map<string, Prom.Histogram.Internal<'kind'>>();
  let request: { counter: Prom.Counter; duration: Prom.Histogram<'kind'> } | undefined;
  const registry = new LazyRegistry(
    (prom) => {
      const made = new prom.Registry();
      made.setDefaultLabels({ function: options.functionName });
      if (options.processMetrics ?? true) prom.collectDefaultMetrics({ register: made });
      request = {
        counter: new prom.Counter({
          name: 'edgeai_requests_total',
          help: 'Requests answered, by CloudEvent type or route and HTTP status',
          labelNames: ['kind', 'status'],
          registers: [made],
        }),
        duration: new prom.Histogram({
          name: 'edgeai_request_duration_seconds',
          help: 'Time from request start to answer, by CloudEvent type or route',
          labelNames: ['kind'],
          buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
          registers: [made],
        }),
      };
      return made;
    },
    (err) => log.error({ err }, 'metrics failed'),
  );
  const record = (kind: string, status: number, seconds: number) => {
    if (request === undefined) return;
    const key = `${kind} ${status}`;
    let counter = counters.get(key);
    if (counter === undefined) {
      counter = request.counter.labels({ kind, status: String(status) });
      counters.set(key, counter);
    }
    counter.inc();
    let histogram = histograms.get(kind);
    if (histogram === undefined) {
      histogram = request.duration.labels({ kind });
      histograms.set(kind, histogram);
    }
    histogram.observe(seconds);
  };
  return {
    log,
    logRequest: requestLine(log, destination),
    observe(kind, status, seconds) {
      if (request !== undefined) return record(kind, status, seconds);
      registry.use(() => record(kind, status, seconds));
      registry.start();
    },
    async scrape() {
      const { registry: loaded } = await registry.load();
      return { contentType: loaded.contentType, body: await loaded.metrics() };
    },
    withRegistry(use) {
      registry.use(use);
    },
  };
}

/**
 * A function's own metrics, registered on its telemetry's registry (so prom-client stays behind
 * this one file). Label values are whatever the caller passes: keep them to small fixed sets.
 * Defined and recorded at once when prom-client has loaded, else when it does (see the file
 * comment).
 */
function defineMetrics(telemetry: Pick<Telemetry, 'withRegistry'>) {
  const at = <M>(make: (prom: PromClient, registers: Prom.Registry[]) => M) => {
    let metric: M | undefined;
    telemetry.withRegistry((prom, registry) => (metric = make(prom, [registry])));
    return (use: (made: M) => void) => {
      if (metric !== undefined) use(metric);
      // Queued after `make`: the metric exists when this runs.
      else
        telemetry.withRegistry(() => {
          if (metric !== undefined) use(metric);
        });
    };
  };
  return {
    counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []) {
      const later = at(
        (prom, registers) => new prom.Counter({ name, help, labelNames, registers }),
      );
      return (labels: Partial<Record<L, string>> = {}, value = 1) =>
        later((metric) => metric.inc(labels, value));
    },
    histogram<L extends string>(
      name: string,
      help: string,
      buckets: number[],
      labelNames: readonly L[] = [],
    ) {
      const later = at(
        (prom, registers) => new prom.Histogram({ name, help, labelNames, buckets, registers }),
      );
      return (labels: Partial<Record<L, string>>, value: number) =>
        later((metric) => metric.observe(labels, value));
    },
    /** A gauge read when scraped. */
    gauge(name: string, help: string, read: () => number) {
      at(
        (prom, registers) =>
          new prom.Gauge({
            name,
            help,
            registers,
            collect() {
              this.set(read());
            },
          }),
      );
    },
  };
}

export { batchedLines, createTelemetry, defineMetrics };
export type { Telemetry, Logger };
