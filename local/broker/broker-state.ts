/**
 * What one development broker's ingress and deliveries share: its Brokers and Triggers by key,
 * its counters, the signal that stops it and the deliveries in flight (see broker.ts).
 */
import { setMaxListeners } from 'node:events';
import type { BrokerCounters, BrokerRecord, DevBrokerOptions } from './broker.js';
import type { BrokerSpec, TriggerSpec } from './manifests.js';

/** One broker's state, passed explicitly to the ingress, ingest, dispatch and send. */
interface BrokerState {
  readonly options: DevBrokerOptions;
  /** Per attempt, unless a delivery spec sets `timeout`. */
  readonly requestTimeoutMs: number;
  /** Largest request body the ingress reads. */
  readonly bodyLimit: number;
  /** The Brokers by `namespace/name`. */
  readonly brokers: ReadonlyMap<string, BrokerSpec>;
  /** The Triggers by their Broker's `namespace/name`. */
  readonly triggersOf: ReadonlyMap<string, TriggerSpec[]>;
  readonly counters: BrokerCounters;
  /** Aborted by close(): attempts and backoff waits end, new events are dropped. */
  readonly stopping: AbortController;
  /** Every dispatch in progress (retries, dead letters, replies included); idle() waits for it. */
  readonly inflight: Set<Promise<void>>;
}

/** Indexes the manifests and zeroes the counters for a new broker. */
function createBrokerState(options: DevBrokerOptions): BrokerState {
  const brokers = new Map<string, BrokerSpec>();
  for (const b of options.manifests.brokers) brokers.set(`${b.namespace}/${b.name}`, b);
  const triggersOf = new Map<string, TriggerSpec[]>();
  for (const t of options.manifests.triggers) {
    const key = `${t.namespace}/${t.broker}`;
    triggersOf.set(key, [...(triggersOf.get(key) ?? []), t]);
  }
  // Every attempt in flight listens to it (a burst of events is many at once): no leak warning.
  const stopping = new AbortController();
  setMaxListeners(0, stopping.signal);
  return {
    options,
    requestTimeoutMs: options.requestTimeoutMs ?? 30_000,
    bodyLimit: options.bodyLimitBytes ?? 10 * 1024 * 1024,
    brokers,
    triggersOf,
    counters: {
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
    },
    stopping,
    inflight: new Set(),
  };
}

/** The one way a step is recorded: counted, then given to onEvent (whose throws only warn). */
function emit(state: BrokerState, record: BrokerRecord): void {
  const { counters } = state;
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
    state.options.onEvent?.(record);
  } catch (err) {
    process.emitWarning(
      `development broker: the onEvent callback threw: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** Keeps a dispatch in `inflight` until it settles, so idle() and close() can wait for it. */
function track(state: BrokerState, work: Promise<void>): void {
  state.inflight.add(work);
  void work.finally(() => state.inflight.delete(work));
}

/** Resolves once nothing is in flight, including work started while waiting (replies). */
async function settled(state: BrokerState): Promise<void> {
  while (state.inflight.size > 0) await Promise.all([...state.inflight]);
}

export { createBrokerState, emit, settled, track };
export type { BrokerState };
