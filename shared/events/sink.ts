/**
 * Sending events to K_SINK, the address a Knative SinkBinding (or a Source) injects — the
 * Broker, in our manifests — in binary mode, with retries under one backoff: what a function
 * emits on its own rather than as a reply.
 */
import { ExponentialBackoff, handleWhen, retry } from 'cockatiel';
import { UnavailableError } from '../errors/index.js';
import { headerValue } from './cloudevents.js';

interface SinkEvent {
  /** Chosen by the caller: a resent event keeps its id, so the consumer can drop the copy. */
  id: string;
  type: string;
  /** The body: bytes as they are (application/octet-stream), anything else JSON-encoded. */
  data: unknown;
  subject?: string;
  extensions?: Readonly<Record<string, string>>;
  traceparent?: string;
}

type Sink = (event: SinkEvent) => Promise<void>;

/**
 * How an event is posted: resolves with the answer's status, rejects when none came
 * (shared/http's sinkPost is the one the functions use).
 */
type SinkPost = (
  url: string,
  request: { headers: Record<string, string>; body: Uint8Array | string; timeoutMs: number },
) => Promise<number>;

/**
 * The sink refused the event for good (a 4xx other than those Knative retries: 404, 408, 409,
 * 429): sending it again cannot help, so it is not retried.
 */
class SinkRefusedError extends Error {
  override readonly name = 'SinkRefusedError';
  constructor(readonly status: number) {
    super(`event sink refused the event: HTTP ${status}`);
  }
}

const retriedStatuses = new Set([404, 408, 409, 429]);

/**
 * A sink that tries `attempts` times in all; UnavailableError (503) when it gives up, and
 * SinkRefusedError at once when the sink refuses the event.
 */
function createEventSink(options: {
  url: string;
  source: string;
  attempts: number;
  timeoutMs?: number;
  /** Sent with every event (credentials for a receiver that checks who sends). */
  headers?: Readonly<Record<string, string>>;
  post: SinkPost;
}): Sink {
  const { post } = options;
  const policy = retry(
    handleWhen((err) => !(err instanceof SinkRefusedError)),
    {
      maxAttempts: options.attempts - 1,
      backoff: new ExponentialBackoff({ initialDelay: 20, maxDelay: 500 }),
    },
  );
  return async (event) => {
    const headers: Record<string, string> = {};
    // Extensions first, so that none can stand in for a required attribute.
    for (const [name, value] of Object.entries(event.extensions ?? {})) {
      headers[`ce-${name}`] = headerValue(value);
    }
    const bytes = event.data instanceof Uint8Array ? event.data : undefined;
    Object.assign(headers, {
      'content-type': bytes === undefined ? 'application/json' : 'application/octet-stream',
      'ce-specversion': '1.0',
      'ce-id': headerValue(event.id),
      'ce-source': headerValue(options.source),
      'ce-type': headerValue(event.type),
    });
    if (event.subject !== undefined) headers['ce-subject'] = headerValue(event.subject);
    if (event.traceparent !== undefined) headers['traceparent'] = event.traceparent;
    Object.assign(headers, options.headers);
    const body = bytes ?? JSON.stringify(event.data);
    try {
      await policy.execute(async () => {
        const timeoutMs = options.timeoutMs ?? 5000;
        const status = await post(options.url, { headers, body, timeoutMs });
        if (status >= 400 && status < 500 && !retriedStatuses.has(status)) {
          throw new SinkRefusedError(status);
        }
        if (status < 200 || status > 299) throw new Error(`sink answered ${status}`);
      });
    } catch (err) {
      if (err instanceof SinkRefusedError) throw err;
      throw new UnavailableError(
        `event sink unavailable: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  };
}

export { createEventSink, SinkRefusedError };
export type { Sink, SinkEvent, SinkPost };
