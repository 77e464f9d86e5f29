/**
 * Delivering one event to one destination with the retries of its delivery spec: the loop
 * around delivery.ts's single attempt, recording each retry (see broker.ts).
 */
import type { BrokerState } from './broker-state.js';
import { emit } from './broker-state.js';
import type { BrokerEvent } from './codec.js';
import { backoffMs, isRetryableStatus, postEvent, sleep } from './delivery.js';
import type { Attempt } from './delivery.js';
import type { DeliverySpec, Destination, KReference } from './manifests.js';

/** Which Trigger an event is sent for, and whether to its subscriber or its dead-letter sink. */
interface SendContext {
  broker: string;
  trigger: string;
  target: 'subscriber' | 'dead-letter';
}

/** How a send ended: a 2xx answer, or the last failed attempt (or the broker closing). */
type SendResult =
  | {
      ok: true;
      url: string;
      status: number;
      attempts: number;
      headers: Record<string, string>;
      body: Buffer;
    }
  | SendFailure;

type SendFailure = {
  ok: false;
  aborted: boolean;
  url: string | undefined;
  status: number | undefined;
  error: string | undefined;
  body: Buffer | undefined;
  attempts: number;
};

/** Names a reference in messages. */
function describeRef(ref: KReference): string {
  return `${ref.kind} ${ref.namespace}/${ref.name} (${ref.apiVersion})`;
}

/** The destination's URL now (a ref is resolved at every attempt); undefined when it has none. */
function address(
  state: BrokerState,
  destination: Destination,
  namespace: string,
): string | undefined {
  const { ref, uri } = destination;
  if (ref === undefined) return uri;
  const base = state.options.resolve({ ...ref, namespace: ref.namespace || namespace });
  if (base === undefined) return undefined;
  return uri === undefined ? base : new URL(uri, base).toString();
}

/** The failed attempt a destination without an address counts as (retried like a 404). */
function noAddress(destination: Destination, namespace: string): Attempt {
  const { ref } = destination;
  const what =
    ref === undefined
      ? 'destination'
      : describeRef({ ...ref, namespace: ref.namespace || namespace });
  return { error: `${what} has no address` };
}

/** An attempt's status and error, each undefined when the attempt has none. */
function statusAndError(outcome: Attempt): {
  status: number | undefined;
  error: string | undefined;
} {
  return {
    status: 'status' in outcome ? outcome.status : undefined,
    error: 'error' in outcome ? outcome.error : undefined,
  };
}

/** The result of a send that ends on a failed attempt. */
function failure(
  outcome: Attempt,
  url: string | undefined,
  attempts: number,
  aborted: boolean,
): SendFailure {
  return {
    ok: false,
    aborted,
    url,
    ...statusAndError(outcome),
    body: 'body' in outcome ? outcome.body : undefined,
    attempts,
  };
}

/** Delivers with retries; never throws. */
async function send(
  state: BrokerState,
  destination: Destination,
  namespace: string,
  event: BrokerEvent,
  delivery: DeliverySpec,
  context: SendContext,
): Promise<SendResult> {
  const { signal } = state.stopping;
  for (let attempt = 1; ; attempt += 1) {
    const url = address(state, destination, namespace);
    const outcome =
      url === undefined
        ? noAddress(destination, namespace)
        : await postEvent(url, event, {
            timeoutMs: delivery.timeoutMs ?? state.requestTimeoutMs,
            signal,
            preferReply: context.target === 'subscriber',
          });
    if (signal.aborted) return failure(outcome, url, attempt, true);
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
    if (!retryable || attempt > delivery.retry) return failure(outcome, url, attempt, false);
    const delayMs = Math.min(backoffMs(delivery, attempt), state.options.maxBackoffMs ?? Infinity);
    emit(state, {
      kind: 'retried',
      ...context,
      url,
      retry: attempt,
      ...statusAndError(outcome),
      delayMs,
      event,
    });
    if (!(await sleep(delayMs, signal))) return failure(outcome, url, attempt, true);
  }
}

/** Says what a failed send got, for drop details. */
function describeFailure(result: SendFailure): string {
  const what = result.status !== undefined ? `answered ${result.status}` : (result.error ?? '');
  const where = result.url === undefined ? '' : `POST ${result.url} `;
  return `${where}${what} (${result.attempts} attempt${result.attempts === 1 ? '' : 's'})`;
}

export { describeFailure, send };
export type { SendContext, SendFailure, SendResult };
