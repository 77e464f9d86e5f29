/**
 * Routing inside the development broker: `ingest` applies the loop guard and fans an event out
 * to the Triggers whose filter passes; `dispatch` delivers it to one Trigger's subscriber, puts
 * a reply back into the broker and sends a failed event to the dead-letter sink (see broker.ts).
 */
import type { BrokerState } from './broker-state.js';
import { emit, track } from './broker-state.js';
import type { DropReason, IngestResult } from './broker.js';
import { decodeHttpEvent, withAttribute } from './codec.js';
import type { BrokerEvent } from './codec.js';
import { matchesFilter } from './filters.js';
import type { BrokerSpec, DeliverySpec, Destination, TriggerSpec } from './manifests.js';
import { describeFailure, send } from './send.js';
import type { SendFailure, SendResult } from './send.js';

/** The loop-guard extension and its starting value (Knative's broker.TTLAttribute, defaultTTL). */
const ttlAttribute = 'knativebrokerttl';
const defaultTtl = 255;

const noDelivery: DeliverySpec = {
  retry: 0,
  backoffPolicy: undefined,
  backoffDelayMs: undefined,
  timeoutMs: undefined,
  deadLetterSink: undefined,
};

/** One event on its way to one Trigger: what every step of its delivery needs. */
interface Job {
  state: BrokerState;
  broker: BrokerSpec;
  trigger: TriggerSpec;
  /** `namespace/name` of the broker and the trigger, as records name them. */
  keys: { broker: string; trigger: string };
  delivery: DeliverySpec;
  event: BrokerEvent;
  /** The TTL the event entered with, which a reply to it gets. */
  ttl: number;
}

function parseTtl(value: string | undefined): number | undefined {
  if (value === undefined || !/^-?\d+$/.test(value.trim())) return undefined;
  return Number(value);
}

/** Records the end of a Trigger's delivery without success (by default, of the job's event). */
function drop(job: Job, reason: DropReason, detail: string, event: BrokerEvent = job.event): void {
  emit(job.state, { kind: 'dropped', ...job.keys, reason, detail, event });
}

/** Records an event the ingress will not route (no trigger is involved yet). */
function dropAtIngress(
  state: BrokerState,
  broker: string,
  reason: DropReason,
  detail: string,
  event: BrokerEvent,
): IngestResult {
  emit(state, { kind: 'dropped', broker, trigger: undefined, reason, detail, event });
  return 'dropped';
}

/** Puts an event into a broker: the loop guard, then one dispatch per matching Trigger. */
function ingest(
  state: BrokerState,
  namespace: string,
  name: string,
  event: BrokerEvent,
): IngestResult {
  const brokerKey = `${namespace}/${name}`;
  const broker = state.brokers.get(brokerKey);
  if (broker === undefined) return 'not-found';
  const given = parseTtl(event.attributes[ttlAttribute]);
  const ttl = given === undefined ? defaultTtl : given - 1;
  if (ttl <= 0) {
    const detail = `${ttlAttribute} reached 0: replies to replies went round the broker too often (a loop?)`;
    return dropAtIngress(state, brokerKey, 'ttl-exhausted', detail, event);
  }
  if (state.stopping.signal.aborted)
    return dropAtIngress(state, brokerKey, 'closed', 'the broker is closed', event);
  emit(state, {
    kind: 'accepted',
    broker: brokerKey,
    ttl,
    event: withAttribute(event, ttlAttribute, String(ttl)),
  });
  // Knative's filter takes the TTL off before filtering and delivering.
  const outgoing = withAttribute(event, ttlAttribute, undefined);
  const matching = (state.triggersOf.get(brokerKey) ?? []).filter((t) =>
    matchesFilter(t.filter, outgoing.attributes),
  );
  if (matching.length === 0) emit(state, { kind: 'unmatched', broker: brokerKey, event: outgoing });
  for (const trigger of matching) {
    track(
      state,
      dispatch(state, broker, trigger, outgoing, ttl).catch((err: unknown) => {
        emit(state, {
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

/** Delivers an event to one Trigger's subscriber, then follows up on the answer or failure. */
async function dispatch(
  state: BrokerState,
  broker: BrokerSpec,
  trigger: TriggerSpec,
  event: BrokerEvent,
  ttl: number,
): Promise<void> {
  const job: Job = {
    state,
    broker,
    trigger,
    keys: {
      broker: `${broker.namespace}/${broker.name}`,
      trigger: `${trigger.namespace}/${trigger.name}`,
    },
    delivery: trigger.delivery ?? broker.delivery ?? noDelivery,
    event,
    ttl,
  };
  const result = await send(state, trigger.subscriber, trigger.namespace, event, job.delivery, {
    ...job.keys,
    target: 'subscriber',
  });
  if (result.ok) {
    emit(state, {
      kind: 'delivered',
      ...job.keys,
      url: result.url,
      status: result.status,
      attempts: result.attempts,
      event,
    });
    if (result.status === 200) forwardReply(job, result);
    return;
  }
  if (result.aborted)
    return drop(job, 'closed', 'the broker was closed before the event was delivered');
  const sink = job.delivery.deadLetterSink;
  if (sink === undefined) return drop(job, 'undeliverable', describeFailure(result));
  await deadLetter(job, sink, result);
}

/** A 200 carrying a CloudEvent is a reply: it goes back into the broker with the job's TTL. */
function forwardReply(job: Job, result: Extract<SendResult, { ok: true }>): void {
  let reply: BrokerEvent | undefined;
  try {
    reply = decodeHttpEvent(result.headers, result.body);
  } catch (err) {
    drop(
      job,
      'invalid-reply',
      `the reply from ${result.url} is not a valid CloudEvent: ${err instanceof Error ? err.message : String(err)}`,
    );
    return;
  }
  if (reply === undefined) return;
  const stamped = withAttribute(reply, ttlAttribute, String(job.ttl));
  emit(job.state, { kind: 'replied', ...job.keys, event: stamped });
  ingest(job.state, job.broker.namespace, job.broker.name, stamped);
}

/**
 * The extensions Knative's dispatcher adds to a dead-lettered event; the response body is
 * base64-encoded and cut at 1,024 bytes.
 */
function withErrorExtensions(event: BrokerEvent, result: SendFailure): BrokerEvent {
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
  return dead;
}

/** After the subscriber's last failed attempt: the dead-letter sink gets the event, retried too. */
async function deadLetter(job: Job, sink: Destination, result: SendFailure): Promise<void> {
  const dead = withErrorExtensions(job.event, result);
  const lettered = await send(job.state, sink, job.trigger.namespace, dead, job.delivery, {
    ...job.keys,
    target: 'dead-letter',
  });
  if (lettered.ok) {
    emit(job.state, {
      kind: 'dead-lettered',
      ...job.keys,
      url: lettered.url,
      status: lettered.status,
      event: dead,
    });
  } else if (lettered.aborted) {
    drop(job, 'closed', 'the broker was closed before the event was dead-lettered', dead);
  } else {
    drop(
      job,
      'dead-letter-failed',
      `${describeFailure(result)}; dead-letter sink: ${describeFailure(lettered)}`,
      dead,
    );
  }
}

export { ingest, ttlAttribute };
