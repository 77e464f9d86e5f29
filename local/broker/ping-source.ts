/**
 * Knative's PingSource for the local stack: on its cron schedule (UTC, see cron.ts), or every
 * `everyMs` milliseconds for tests and demos, each source sends `dev.knative.sources.ping` with
 * source `/apis/v1/namespaces/<ns>/pingsources/<name>`, `spec.data` (or `dataBase64`) as data,
 * `spec.contentType` as datacontenttype, its `ceOverrides` extensions, and as time the tick it
 * stands for. A Broker sink gets the event in-process (DevBroker.ingest); any other sink is
 * resolved and POSTed to once, in binary mode. Timers are unref'd: they never keep the process
 * alive, and `stop` ends them.
 */
import { randomUUID } from 'node:crypto';
import { eventTypes } from '../../shared/events/index.js';
import type { DevBroker, Resolver } from './broker.js';
import type { BrokerEvent } from './codec.js';
import { postEvent } from './delivery.js';
import type { Destination, PingSourceSpec } from './manifests.js';

/** One tick's event and what became of it. */
interface PingRecord {
  /** `namespace/name` of the PingSource. */
  source: string;
  event: BrokerEvent;
  /** Broker sinks: what ingest answered; other sinks: whether the POST got a 2xx. */
  outcome: 'accepted' | 'not-found' | 'dropped' | 'sent' | 'failed';
  detail: string | undefined;
}

interface PingSourcesOptions {
  sources: readonly PingSourceSpec[];
  /** Receives the events of sources whose sink is a Broker. */
  broker: Pick<DevBroker, 'ingest'>;
  /** Addresses of sinks that are not Brokers (none needed for the repository's manifests). */
  resolve?: Resolver;
  /** Fire every `everyMs` milliseconds instead of on the schedule. */
  everyMs?: number;
  onTick?: (record: PingRecord) => void;
  /** For a non-Broker sink's POST (default 10 s). */
  requestTimeoutMs?: number;
}

interface PingSources {
  /** Sends one tick of a source now (time: now), whatever its schedule. */
  fire(namespace: string, name: string): Promise<PingRecord>;
  stop(): void;
}

/** setTimeout's longest wait; a later tick is reached in several waits. */
const maxWaitMs = 2 ** 31 - 1;

function pingEvent(source: PingSourceSpec, time: Date): BrokerEvent {
  const attributes: Record<string, string> = {
    ...source.extensions,
    specversion: '1.0',
    id: randomUUID(),
    source: `/apis/v1/namespaces/${source.namespace}/pingsources/${source.name}`,
    type: eventTypes.pingTick,
    time: time.toISOString(),
  };
  if (source.contentType !== undefined) attributes['datacontenttype'] = source.contentType;
  return { attributes, data: source.data };
}

function isBrokerRef(source: PingSourceSpec): boolean {
  const { ref, uri } = source.sink;
  return (
    ref !== undefined &&
    uri === undefined &&
    ref.kind === 'Broker' &&
    ref.apiVersion.startsWith('eventing.knative.dev/')
  );
}

/** A non-Broker sink's POST: its timeout, and the signal `stop` aborts. */
interface PostOptions {
  timeoutMs: number;
  signal: AbortSignal;
}

type Outcome = Pick<PingRecord, 'outcome' | 'detail'>;

/** Hands the event to the Broker in-process; no await, so onTick runs before `send` returns. */
function ingestPing(
  sink: Destination,
  event: BrokerEvent,
  broker: Pick<DevBroker, 'ingest'>,
): Outcome {
  const ref = sink.ref!;
  const outcome = broker.ingest(ref.namespace, ref.name, event);
  return {
    outcome,
    detail:
      outcome === 'not-found' ? `broker ${ref.namespace}/${ref.name} does not exist` : undefined,
  };
}

/** A non-Broker sink's address: its URI, its ref's address, or the URI relative to that. */
function sinkUrl(sink: Destination, resolve: Resolver | undefined): string | undefined {
  const { ref, uri } = sink;
  const base = ref === undefined ? uri : resolve?.(ref);
  if (base === undefined) return undefined;
  return uri === undefined || ref === undefined ? base : new URL(uri, base).toString();
}

/** POSTs the event once; a 2xx is `sent`, anything else `failed`. */
async function postPing(
  sink: Destination,
  event: BrokerEvent,
  resolve: Resolver | undefined,
  post: PostOptions,
): Promise<Outcome> {
  const url = sinkUrl(sink, resolve);
  if (url === undefined) return { outcome: 'failed', detail: 'the sink has no address' };
  const attempt = await postEvent(url, event, {
    timeoutMs: post.timeoutMs,
    signal: post.signal,
    preferReply: false,
  });
  const ok = 'status' in attempt && attempt.status >= 200 && attempt.status < 300;
  return {
    outcome: ok ? 'sent' : 'failed',
    detail: ok
      ? undefined
      : `POST ${url} ${'status' in attempt ? `answered ${attempt.status}` : attempt.error}`,
  };
}

/** Sends one tick of a source and reports it to onTick. */
async function sendPing(
  source: PingSourceSpec,
  time: Date,
  options: Pick<PingSourcesOptions, 'broker' | 'resolve' | 'onTick'>,
  post: PostOptions,
): Promise<PingRecord> {
  const event = pingEvent(source, time);
  const outcome = isBrokerRef(source)
    ? ingestPing(source.sink, event, options.broker)
    : await postPing(source.sink, event, options.resolve, post);
  const record: PingRecord = { source: `${source.namespace}/${source.name}`, event, ...outcome };
  try {
    options.onTick?.(record);
  } catch (err) {
    process.emitWarning(
      `PingSource: the onTick callback threw: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  return record;
}

/** Starts every source's timer. */
function startPingSources(options: PingSourcesOptions): PingSources {
  const timers = new Set<NodeJS.Timeout>();
  const stopping = new AbortController();
  const post: PostOptions = {
    timeoutMs: options.requestTimeoutMs ?? 10_000,
    signal: stopping.signal,
  };
  const send = (source: PingSourceSpec, time: Date) => sendPing(source, time, options, post);

  function later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      timers.delete(timer);
      run();
    }, ms);
    timer.unref();
    timers.add(timer);
  }

  function schedule(source: PingSourceSpec, after: Date): void {
    const due = source.schedule.next(after);
    if (due === undefined || stopping.signal.aborted) return;
    const wait = () => {
      if (stopping.signal.aborted) return;
      const left = due.getTime() - Date.now();
      if (left > 0) return later(Math.min(left, maxWaitMs), wait);
      void send(source, due);
      schedule(source, new Date(Math.max(Date.now(), due.getTime())));
    };
    wait();
  }

  for (const source of options.sources) {
    if (options.everyMs !== undefined) {
      const timer = setInterval(() => void send(source, new Date()), options.everyMs);
      timer.unref();
      timers.add(timer);
    } else {
      schedule(source, new Date());
    }
  }

  return {
    fire(namespace, name) {
      const source = options.sources.find((s) => s.namespace === namespace && s.name === name);
      if (source === undefined) {
        return Promise.reject(new Error(`no PingSource ${namespace}/${name}`));
      }
      return send(source, new Date());
    },
    stop() {
      stopping.abort();
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}

export { startPingSources };
export type { PingSources, PingSourcesOptions, PingRecord };
