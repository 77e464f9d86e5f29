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
import type { Server } from 'node:http';
import { once } from 'node:events';
import { createBrokerState, settled } from './broker-state.js';
import type { BrokerEvent } from './codec.js';
import { ingest, ttlAttribute } from './dispatch.js';
import { createIngress } from './ingress.js';
import type { EventingManifests, KReference } from './manifests.js';

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

/**
 * Builds the development broker; see the file comment. The work is in broker-state.ts (what is
 * shared), ingress.ts (HTTP), dispatch.ts (routing, replies, dead letters) and send.ts (retries).
 */
function createDevBroker(options: DevBrokerOptions): DevBroker {
  const state = createBrokerState(options);
  const server = createIngress(state);
  return {
    server,
    async listen(port = 0, host = '127.0.0.1') {
      server.listen(port, host);
      await once(server, 'listening');
      const bound = server.address();
      if (bound === null || typeof bound === 'string') throw new Error('the ingress has no port');
      return `http://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
    },
    ingest: (namespace, name, event) => ingest(state, namespace, name, event),
    counters: () => ({ ...state.counters, droppedBy: { ...state.counters.droppedBy } }),
    idle: () => settled(state),
    async close() {
      state.stopping.abort();
      if (server.listening) {
        server.closeAllConnections();
        const closed = once(server, 'close');
        server.close();
        await closed;
      }
      await settled(state);
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
