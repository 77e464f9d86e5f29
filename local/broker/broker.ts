/**
 * The development Broker: Knative's Broker/Trigger semantics (as the MTChannelBasedBroker
 * implements them) over plain HTTP, for the local stack and tests.
 *
 * - Ingress at `POST /<namespace>/<broker>`: a CloudEvent in binary or structured mode is
 *   answered 202 and delivered asynchronously; a request that is not an event gets 400 naming
 *   the problem, an unknown broker 404.
 * - Every Trigger of the broker whose filter passes gets the event, in binary mode, by a real
 *   HTTP POST to its subscriber's address (`resolve` turns a ref into a URL at each attempt,
 *   so a subscriber that is still starting is retried like a 404).
 * - Failed attempts are retried per the Trigger's `spec.delivery` (else the Broker's), see
 *   delivery.ts; after the last one the event goes to the dead-letter sink with Knative's error
 *   extensions (knativeerrordest, knativeerrorcode, knativeerrordata), else it is dropped.
 * - A 200 answer carrying a CloudEvent is a reply: it goes back into the same broker.
 * - Loop guard, as Knative's ingress and filter do it: `knativebrokerttl` is set to 255 when an
 *   event enters without one, and taken off before delivery; a reply gets the TTL of the event
 *   it answers, and the ingress decrements it; an event whose TTL reaches 0 is dropped.
 *
 * Everything observable goes to `onEvent` and to the counters.
 */
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { once } from 'node:events';
import {
  MethodNotAllowedError,
  NotFoundError,
  PayloadTooLargeError,
  ValidationError,
  errorAnswer,
} from '../../shared/errors/index.js';
import { decodeHttpEvent, withAttribute } from './codec.js';
import type { BrokerEvent } from './codec.js';
import { backoffMs, isRetryableStatus, postEvent, sleep } from './delivery.js';
import { matchesFilter } from './filters.js';
import type {
  BrokerSpec,
  DeliverySpec,
  Destination,
  EventingManifests,
  KReference,
  TriggerSpec,
} from './manifests.js';

/** The loop-guard extension and its starting value (Knative's broker.TTLAttribute, defaultTTL). */
const ttlAttribute = 'knativebrokerttl';
const defaultTtl = 255;

/** Turns a reference into the URL of the object it names; undefined when it has none (yet). */
type Resolver = (ref: KReference) => string | undefined;

type DropReason =
  'ttl-exhausted' | 'undeliverable' | 'dead-letter-failed' | 'invalid-reply' | 'closed';

/** What happened to an event; `broker` and `trigger` are `namespace/name`. */
type BrokerRecord =
  | { kind: 'accepted'; broker: string; ttl: number; event: BrokerEvent }
  | { kind: 'unmatched'; broker: string; event: BrokerEvent }
  | {
      kind: 'delivered';
      broker: string;
      trigger: string;
      url: string;
      status: number;
      attempts: number;
      event: BrokerEvent;
    }
  | {
      kind: 'retried';
      broker: string;
      trigger: string;
      target: 'subscriber' | 'dead-letter';
      url: string | undefined;
      /** The retry about to be made: 1 for the first. */
      retry: number;
      status: number | undefined;
      error: string | undefined;
      delayMs: number;
      event: BrokerEvent;
    }
  | { kind: 'replied'; broker: string; trigger: string; event: BrokerEvent }
  | {
      kind: 'dead-lettered';
      broker: string;
      trigger: string;
      url: string;
      status: number;
      event: BrokerEvent;
    }
  | {
      kind: 'dropped';
      broker: string;
      trigger: string | undefined;
      reason: DropReason;
      detail: string;
      event: BrokerEvent;
    };

interface BrokerCounters {
  accepted: number;
  unmatched: number;
  delivered: number;
  retried: number;
  replied: number;
  deadLettered: number;
  dropped: number;
  droppedBy: Record<DropReason, number>;
}

/** What ingest did with an event. */
type IngestResult = 'accepted' | 'not-found' | 'dropped';

interface DevBrokerOptions {
  /** The Brokers and their Triggers (loadEventing's result; PingSources are not used here). */
  manifests: Pick<EventingManifests, 'brokers' | 'triggers'>;
  resolve: Resolver;
  onEvent?: (record: BrokerRecord) => void;
  /** Per attempt, unless the delivery spec sets `timeout` (default 30 s). */
  requestTimeoutMs?: number;
  /** A cap on each wait between retries (default: none, as in Knative). */
  maxBackoffMs?: number;
  /** Largest request body the ingress reads (default 10 MiB). */
  bodyLimitBytes?: number;
}

interface DevBroker {
  /** The ingress, not listening: use `listen`, or the server itself. */
  readonly server: Server;
  /** Starts the ingress (default: an ephemeral port on 127.0.0.1); resolves to its base URL. */
  listen(port?: number, host?: string): Promise<string>;
  /** Puts an event into a broker without HTTP (what the ingress does after decoding). */
  ingest(namespace: string, name: string, event: BrokerEvent): IngestResult;
  counters(): BrokerCounters;
  /** Resolves once no delivery (retries, dead letters, replies included) is in progress. */
  idle(): Promise<void>;
  /** Stops the ingress and abandons pending retries (their events are dropped as `closed`). */
  close(): Promise<void>;
}

type SendResult =
  | {
      ok: true;
      url: string;
      status: number;
      attempts: number;
      headers: Record<string, string>;
      body: Buffer;
    }
  | {
      ok: false;
      aborted: boolean;
      url: string | undefined;
      status: number | undefined;
      error: string | undefined;
      body: Buffer | undefined;
      attempts: number;
    };

const noDelivery: DeliverySpec = {
  retry: 0,
  backoffPolicy: undefined,
  backoffDelayMs: undefined,
  timeoutMs: undefined,
  deadLetterSink: undefined,
};

function describeRef(ref: KReference): string {
  return `${ref.kind} ${ref.namespace}/${ref.name} (${ref.apiVersion})`;
}

function parseTtl(value: string | undefined): number | undefined {
  if (value === undefined || !/^-?\d+$/.test(value.trim())) return undefined;
  return Number(value);
}

function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? NaN);
    const tooLarge = () =>
      new PayloadTooLargeError(`request body exceeds the limit of ${limit} bytes`);
    if (declared > limit) return reject(tooLarge());
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.removeAllListeners('data');
        reject(tooLarge());
      } else chunks.push(chunk);
    });
    req.once('end', () => resolve(Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
}

/** Builds the development broker; see the file comment. */
function createDevBroker(options: DevBrokerOptions): DevBroker {
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const bodyLimit = options.bodyLimitBytes ?? 10 * 1024 * 1024;
  const brokers = new Map<string, BrokerSpec>();
  for (const b of options.manifests.brokers) brokers.set(`${b.namespace}/${b.name}`, b);
  const triggersOf = new Map<string, TriggerSpec[]>();
  for (const t of options.manifests.triggers) {
    const key = `${t.namespace}/${t.broker}`;
    triggersOf.set(key, [...(triggersOf.get(key) ?? []), t]);
  }

  const counters: BrokerCounters = {
    accepted: 0,
    unmatched: 0,
    delivered: 0,
    retried: 0,
    replied: 0,
    deadLettered: 0,
    dropped: 0,
    droppedBy: {
      'ttl-exhausted': 0,
      undeliverable: 0,
      'dead-letter-failed': 0,
      'invalid-reply': 0,
      closed: 0,
    },
  };
  const stopping = new AbortController();
  const inflight = new Set<Promise<void>>();

  function emit(record: BrokerRecord): void {
    switch (record.kind) {
      case 'accepted':
        counters.accepted += 1;
        break;
      case 'unmatched':
        counters.unmatched += 1;
        break;
      case 'delivered':
        counters.delivered += 1;
        break;
      case 'retried':
        counters.retried += 1;
        break;
      case 'replied':
        counters.replied += 1;
        break;
      case 'dead-lettered':
        counters.deadLettered += 1;
        break;
      case 'dropped':
        counters.dropped += 1;
        counters.droppedBy[record.reason] += 1;
        break;
    }
    try {
      options.onEvent?.(record);
    } catch (err) {
      process.emitWarning(
        `development broker: the onEvent callback threw: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  function address(destination: Destination, namespace: string): string | undefined {
    const { ref, uri } = destination;
    if (ref === undefined) return uri;
    const base = options.resolve({ ...ref, namespace: ref.namespace || namespace });
    if (base === undefined) return undefined;
    return uri === undefined ? base : new URL(uri, base).toString();
  }

  /** Delivers with retries; never throws. */
  async function send(
    destination: Destination,
    namespace: string,
    event: BrokerEvent,
    delivery: DeliverySpec,
    context: { broker: string; trigger: string; target: 'subscriber' | 'dead-letter' },
  ): Promise<SendResult> {
    for (let attempt = 1; ; attempt += 1) {
      const url = address(destination, namespace);
      const outcome =
        url === undefined
          ? {
              error: `${destination.ref === undefined ? 'destination' : describeRef({ ...destination.ref, namespace: destination.ref.namespace || namespace })} has no address`,
            }
          : await postEvent(url, event, {
              timeoutMs: delivery.timeoutMs ?? requestTimeoutMs,
              signal: stopping.signal,
              preferReply: context.target === 'subscriber',
            });
      const failed = (aborted: boolean): SendResult => ({
        ok: false,
        aborted,
        url,
        status: 'status' in outcome ? outcome.status : undefined,
        error: 'error' in outcome ? outcome.error : undefined,
        body: 'body' in outcome ? outcome.body : undefined,
        attempts: attempt,
      });
      if (stopping.signal.aborted) return failed(true);
      if ('status' in outcome && outcome.status >= 200 && outcome.status < 300) {
        return {
          ok: true,
          url: url!,
          status: outcome.status,
          attempts: attempt,
          headers: outcome.headers,
          body: outcome.body,
        };
      }
      const retryable = 'error' in outcome || isRetryableStatus(outcome.status);
      if (!retryable || attempt > delivery.retry) return failed(false);
      const delayMs = Math.min(backoffMs(delivery, attempt), options.maxBackoffMs ?? Infinity);
      emit({
        kind: 'retried',
        ...context,
        url,
        retry: attempt,
        status: 'status' in outcome ? outcome.status : undefined,
        error: 'error' in outcome ? outcome.error : undefined,
        delayMs,
        event,
      });
      if (!(await sleep(delayMs, stopping.signal))) return failed(true);
    }
  }

  function describeFailure(result: Extract<SendResult, { ok: false }>): string {
    const what = result.status !== undefined ? `answered ${result.status}` : (result.error ?? '');
    const where = result.url === undefined ? '' : `POST ${result.url} `;
    return `${where}${what} (${result.attempts} attempt${result.attempts === 1 ? '' : 's'})`;
  }

  async function dispatch(
    broker: BrokerSpec,
    trigger: TriggerSpec,
    event: BrokerEvent,
    ttl: number,
  ) {
    const brokerKey = `${broker.namespace}/${broker.name}`;
    const triggerKey = `${trigger.namespace}/${trigger.name}`;
    const context = { broker: brokerKey, trigger: triggerKey };
    const delivery = trigger.delivery ?? broker.delivery ?? noDelivery;
    const drop = (reason: DropReason, detail: string, dropped: BrokerEvent = event) =>
      emit({ kind: 'dropped', ...context, reason, detail, event: dropped });

    const result = await send(trigger.subscriber, trigger.namespace, event, delivery, {
      ...context,
      target: 'subscriber',
    });
    if (result.ok) {
      emit({
        kind: 'delivered',
        ...context,
        url: result.url,
        status: result.status,
        attempts: result.attempts,
        event,
      });
      if (result.status !== 200) return;
      let reply: BrokerEvent | undefined;
      try {
        reply = decodeHttpEvent(result.headers, result.body);
      } catch (err) {
        drop(
          'invalid-reply',
          `the reply from ${result.url} is not a valid CloudEvent: ${err instanceof Error ? err.message : String(err)}`,
        );
        return;
      }
      if (reply === undefined) return;
      const stamped = withAttribute(reply, ttlAttribute, String(ttl));
      emit({ kind: 'replied', ...context, event: stamped });
      ingest(broker.namespace, broker.name, stamped);
      return;
    }
    if (result.aborted)
      return drop('closed', 'the broker was closed before the event was delivered');
    const sink = delivery.deadLetterSink;
    if (sink === undefined) return drop('undeliverable', describeFailure(result));
    // The extensions Knative's dispatcher adds to a dead-lettered event; the response body is
    // base64-encoded and cut at 1,024 bytes.
    let dead = withAttribute(event, 'knativeerrordest', result.url ?? '');
    if (result.status !== undefined)
      dead = withAttribute(dead, 'knativeerrorcode', String(result.status));
    if (result.body !== undefined && result.body.length > 0) {
      dead = withAttribute(
        dead,
        'knativeerrordata',
        result.body.subarray(0, 1024).toString('base64'),
      );
    }
    const lettered = await send(sink, trigger.namespace, dead, delivery, {
      ...context,
      target: 'dead-letter',
    });
    if (lettered.ok) {
      emit({
        kind: 'dead-lettered',
        ...context,
        url: lettered.url,
        status: lettered.status,
        event: dead,
      });
    } else if (lettered.aborted) {
      drop('closed', 'the broker was closed before the event was dead-lettered', dead);
    } else {
      drop(
        'dead-letter-failed',
        `${describeFailure(result)}; dead-letter sink: ${describeFailure(lettered)}`,
        dead,
      );
    }
  }

  function track(work: Promise<void>): void {
    inflight.add(work);
    void work.finally(() => inflight.delete(work));
  }

  function ingest(namespace: string, name: string, event: BrokerEvent): IngestResult {
    const broker = brokers.get(`${namespace}/${name}`);
    if (broker === undefined) return 'not-found';
    const brokerKey = `${namespace}/${name}`;
    const given = parseTtl(event.attributes[ttlAttribute]);
    const ttl = given === undefined ? defaultTtl : given - 1;
    if (ttl <= 0) {
      emit({
        kind: 'dropped',
        broker: brokerKey,
        trigger: undefined,
        reason: 'ttl-exhausted',
        detail: `${ttlAttribute} reached 0: replies to replies went round the broker too often (a loop?)`,
        event,
      });
      return 'dropped';
    }
    if (stopping.signal.aborted) {
      emit({
        kind: 'dropped',
        broker: brokerKey,
        trigger: undefined,
        reason: 'closed',
        detail: 'the broker is closed',
        event,
      });
      return 'dropped';
    }
    emit({
      kind: 'accepted',
      broker: brokerKey,
      ttl,
      event: withAttribute(event, ttlAttribute, String(ttl)),
    });
    // Knative's filter takes the TTL off before filtering and delivering.
    const outgoing = withAttribute(event, ttlAttribute, undefined);
    const matching = (triggersOf.get(brokerKey) ?? []).filter((t) =>
      matchesFilter(t.filter, outgoing.attributes),
    );
    if (matching.length === 0) emit({ kind: 'unmatched', broker: brokerKey, event: outgoing });
    for (const trigger of matching) {
      track(
        dispatch(broker, trigger, outgoing, ttl).catch((err: unknown) => {
          emit({
            kind: 'dropped',
            broker: brokerKey,
            trigger: `${trigger.namespace}/${trigger.name}`,
            reason: 'undeliverable',
            detail: `internal error: ${err instanceof Error ? err.message : String(err)}`,
            event: outgoing,
          });
        }),
      );
    }
    return 'accepted';
  }

  function answer(res: ServerResponse, err: unknown): void {
    const { status, headers, body } = errorAnswer(err);
    const text = JSON.stringify(body);
    res.shouldKeepAlive = false;
    res.writeHead(status, {
      ...headers,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    let parts: string[];
    try {
      parts = path
        .split('/')
        .filter((p) => p !== '')
        .map((p) => decodeURIComponent(p));
    } catch {
      throw new ValidationError(
        `request path ${JSON.stringify(path)} is not valid percent-encoding`,
      );
    }
    if (parts.length !== 2) {
      throw new NotFoundError(`no broker at ${path}: the ingress serves /<namespace>/<broker>`);
    }
    const [namespace, name] = parts as [string, string];
    if (!brokers.has(`${namespace}/${name}`)) {
      throw new NotFoundError(`broker ${namespace}/${name} does not exist`);
    }
    if (req.method !== 'POST') {
      throw new MethodNotAllowedError(`${req.method ?? ''} ${path}: send events with POST`, [
        'POST',
      ]);
    }
    const body = await readBody(req, bodyLimit);
    const event = decodeHttpEvent(req.headers, body);
    if (event === undefined) {
      throw new ValidationError(
        'the request is not a CloudEvent: send binary mode (ce-specversion, ce-id, ce-source and ce-type headers) or structured mode (Content-Type: application/cloudevents+json)',
      );
    }
    ingest(namespace, name, event);
    res.writeHead(202, { 'content-length': '0' });
    res.end();
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      req.resume();
      if (res.headersSent) res.destroy();
      else answer(res, err);
    });
  });

  return {
    server,
    async listen(port = 0, host = '127.0.0.1') {
      server.listen(port, host);
      await once(server, 'listening');
      const bound = server.address();
      if (bound === null || typeof bound === 'string') throw new Error('the ingress has no port');
      return `http://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
    },
    ingest,
    counters: () => ({ ...counters, droppedBy: { ...counters.droppedBy } }),
    async idle() {
      while (inflight.size > 0) await Promise.all([...inflight]);
    },
    async close() {
      stopping.abort();
      if (server.listening) {
        server.closeAllConnections();
        const closed = once(server, 'close');
        server.close();
        await closed;
      }
      while (inflight.size > 0) await Promise.all([...inflight]);
    },
  };
}

/** One line describing a record, for logs and the demo. */
function formatRecord(record: BrokerRecord): string {
  const e = record.event.attributes;
  const what = `${e['type'] ?? '?'} ${e['id'] ?? '?'} from ${e['source'] ?? '?'}`;
  switch (record.kind) {
    case 'accepted':
      return `broker ${record.broker}: accepted ${what} (ttl ${record.ttl})`;
    case 'unmatched':
      return `broker ${record.broker}: no trigger matches ${what}`;
    case 'delivered':
      return `trigger ${record.trigger}: delivered ${what} to ${record.url} (${record.status}, attempt ${record.attempts})`;
    case 'retried':
      return `trigger ${record.trigger}: retry ${record.retry} of ${what} to the ${record.target} in ${record.delayMs} ms (${record.status !== undefined ? `answered ${record.status}` : (record.error ?? '')})`;
    case 'replied':
      return `trigger ${record.trigger}: reply ${what} goes back into ${record.broker}`;
    case 'dead-lettered':
      return `trigger ${record.trigger}: dead-lettered ${what} to ${record.url}`;
    case 'dropped':
      return `${record.trigger !== undefined ? `trigger ${record.trigger}` : `broker ${record.broker}`}: dropped ${what} (${record.reason}: ${record.detail})`;
  }
}

export { createDevBroker, formatRecord, ttlAttribute };
export type {
  DevBroker,
  DevBrokerOptions,
  BrokerRecord,
  BrokerCounters,
  DropReason,
  IngestResult,
  Resolver,
};
