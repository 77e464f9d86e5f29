/**
 * One delivery attempt over HTTP, and which outcomes Knative retries and how long it waits.
 *
 * Retried: network errors (no answer, timeout) and the status codes Knative's dispatcher retries:
 * 404, 408, 409, 429 and every 5xx. Sources: knative/eventing pkg/kncloudevents/retries.go,
 * `SelectiveRetry` ("A retry is triggered for: nil responses, emitted errors, status codes that
 * are 5XX, 404, 408, 409, 429"; 404 because a pod may still be becoming ready, 408 added by
 * knative/eventing#6370), and the data-plane contract, knative/specs
 * specs/eventing/data-plane.md, "Event Acknowledgement and Delivery Retry" (404, 409, 429 and
 * 5xx retried; 400 and other 4xx not; 3xx an error that is not retried). Any other non-2xx
 * answer fails at once and goes to the dead-letter sink.
 *
 * Backoff: the same file's RetryConfigFromDeliverySpec waits `backoffDelay * 2^n`
 * (exponential) or `backoffDelay * n` (linear), where n is go-retryablehttp's attempt index,
 * 0 before the first retry. So with PT0.5S, exponential waits 0.5 s, 1 s, 2 s, ... and linear
 * 0 s, 0.5 s, 1 s, ...; with only one of backoffPolicy and backoffDelay set, retries do not wait.
 */
import type { DeliverySpec } from './manifests.js';
import { binaryHeaders } from './codec.js';
import type { BrokerEvent } from './codec.js';

/** Whether Knative retries an attempt answered with `status`. */
function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 404 || status === 408 || status === 409 || status === 429;
}

/** How long to wait before retry number `retry` (1 for the first retry), in milliseconds. */
function backoffMs(delivery: DeliverySpec, retry: number): number {
  const delay = delivery.backoffDelayMs;
  if (delivery.backoffPolicy === undefined || delay === undefined) return 0;
  const n = retry - 1;
  return delivery.backoffPolicy === 'exponential' ? delay * 2 ** n : delay * n;
}

/** What one attempt got: an answer, or an error instead of one. */
type Attempt =
  { status: number; headers: Record<string, string>; body: Buffer } | { error: string };

/**
 * POSTs the event in binary mode. `preferReply` sends `Prefer: reply`, which the data-plane
 * contract asks brokers to send to subscribers. Redirects are not followed (a 3xx is an error).
 */
async function postEvent(
  url: string,
  event: BrokerEvent,
  options: { timeoutMs: number; signal: AbortSignal; preferReply: boolean },
): Promise<Attempt> {
  const headers = binaryHeaders(event);
  if (options.preferReply) headers['prefer'] = 'reply';
  // One controller and a plain timer rather than AbortSignal.any(AbortSignal.timeout(...)): on
  // Node 20 a timeout signal only referenced by an any() signal can be garbage-collected before
  // it fires, and the request then waits forever.
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.timeoutMs);
  const stop = () => controller.abort();
  if (options.signal.aborted) controller.abort();
  else options.signal.addEventListener('abort', stop, { once: true });
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers,
      body: event.data.length === 0 ? undefined : new Uint8Array(event.data),
      redirect: 'manual',
      signal: controller.signal,
    });
    const body = Buffer.from(await response.arrayBuffer());
    return { status: response.status, headers: Object.fromEntries(response.headers), body };
  } catch (err) {
    if (timedOut) return { error: `no answer within ${options.timeoutMs} ms` };
    const cause =
      err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return { error: `${err instanceof Error ? err.message : String(err)}${cause}` };
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', stop);
  }
}

/** Resolves after `ms`, or early (false) when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export { isRetryableStatus, backoffMs, postEvent, sleep };
export type { Attempt };
