/**
 * Sending events to K_SINK, the address a Knative SinkBinding (or a Source) injects — the
 * Broker, in our manifests — in binary mode, with retries under one backoff: what a function
 * emits on its own rather than as a reply.
 */
import { ExponentialBackoff, handleAll, retry } from 'cockatiel';
import { UnavailableError } from '../errors/index.js';

interface SinkEvent {
  /** Chosen by the caller: a resent event keeps its id, so the consumer can drop the copy. */
  id: string;
  type: string;
  /** JSON-encoded as the body. */
  data: unknown;
  subject?: string;
  extensions?: Readonly<Record<string, string>>;
  traceparent?: string;
}

type Sink = (event: SinkEvent) => Promise<void>;

/** A sink that tries `attempts` times in all; UnavailableError (503) when it gives up. */
function createEventSink(options: {
  url: string;
  source: string;
  attempts: number;
  timeoutMs?: number;
  send?: typeof fetch;
}): Sink {
  const send = options.send ?? fetch;
  const policy = retry(handleAll, {
    maxAttempts: options.attempts - 1,
    backoff: new ExponentialBackoff({ initialDelay: 20, maxDelay: 500 }),
  });
  return async (event) => {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'ce-specversion': '1.0',
      'ce-id': event.id,
      'ce-source': options.source,
      'ce-type': event.type,
    };
    if (event.subject !== undefined) headers['ce-subject'] = event.subject;
    for (const [name, value] of Object.entries(event.extensions ?? {}))
      headers[`ce-${name}`] = value;
    if (event.traceparent !== undefined) headers['traceparent'] = event.traceparent;
    const body = JSON.stringify(event.data);
    try {
      await policy.execute(async () => {
        const response = await send(options.url, {
          method: 'POST',
          headers,
          body,
          signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
        });
        if (!response.ok) throw new Error(`sink answered ${response.status}`);
      });
    } catch (err) {
      throw new UnavailableError(
        `event sink unavailable: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  };
}

export { createEventSink };
export type { Sink, SinkEvent };
