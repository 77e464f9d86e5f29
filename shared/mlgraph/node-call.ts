/**
 * One HTTP call from the graph executor to a node, under a deadline, with the retries its edge
 * allows. A failure is a StepFailure with the status the graph answers if the step is Hard: the
 * node's own 4xx or 5xx (with its message), 502 when it gave no answer, 504 when it answered too
 * late. Only "no answer", 502, 503 and 504 are retried: a 4xx would be the same again, and a 500
 * is a bug a retry hides. Every node the executor calls is idempotent for a prediction id (a
 * model is a function, a router keeps a prediction's first route, a join counts a source once).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CallTimeoutError } from '../http/index.js';
import type { HttpAnswer, HttpSend } from '../http/index.js';
import { payloadOf } from './payload.js';
import type { Payload } from './payload.js';

class StepFailure extends Error {
  override readonly name = 'StepFailure';
  constructor(
    readonly status: number,
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

interface CallAnswer {
  status: number;
  header: HttpAnswer['header'];
  payload: Payload;
}

interface CallOptions {
  method: 'GET' | 'POST';
  body?: Buffer | string;
  headers: Record<string, string>;
  /** This attempt's own limit, within the request's remaining budget. */
  timeoutMs: number;
  /**
   * Aborted when the request as a whole fails: the other steps stop at once. None for a call
   * with no sibling in flight (nothing to stop it for).
   */
  signal?: AbortSignal | undefined;
}

const retryableStatuses = new Set([502, 503, 504]);

/** The message of an error answer: OIP's `{"error": "..."}`, ours, or the text itself. */
function errorMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    if (typeof body.error === 'string') return body.error;
    const nested = body.error as { message?: unknown } | undefined;
    if (typeof nested?.message === 'string') return nested.message;
    if (typeof body.message === 'string') return body.message;
  } catch {
    // Not JSON: the text, shortened.
  }
  return text.length > 300 ? `${text.slice(0, 300)}...` : text || '(no message)';
}

async function callOnce(send: HttpSend, url: string, options: CallOptions): Promise<CallAnswer> {
  let answer: HttpAnswer;
  try {
    answer = await send(url, options);
  } catch (error) {
    if (options.signal?.aborted === true) throw error;
    if (error instanceof CallTimeoutError)
      throw new StepFailure(504, `no answer within ${options.timeoutMs} ms`, true);
    const { code, message } = error as { code?: string; message?: string };
    throw new StepFailure(502, `no answer: ${code ?? message ?? String(error)}`, true);
  }
  if (answer.status >= 400) {
    const message = errorMessage(answer.body.toString('utf8'));
    throw new StepFailure(answer.status, message, retryableStatuses.has(answer.status));
  }
  try {
    const payload = payloadOf(
      answer.body,
      answer.header('content-type'),
      answer.header('inference-header-content-length'),
    );
    return { status: answer.status, header: answer.header, payload };
  } catch (error) {
    throw new StepFailure(502, `unreadable answer: ${(error as Error).message}`, false);
  }
}

/**
 * Calls `url`, retrying a retryable failure up to `retries` times (20, 40, 80 ms apart, with
 * jitter) while the deadline allows; each attempt's limit is `attemptMs` or what is left.
 */
async function callNode(
  send: HttpSend,
  url: string,
  options: Omit<CallOptions, 'timeoutMs'> & {
    retries: number;
    attemptMs: number | undefined;
    deadline: number;
    now: () => number;
  },
): Promise<CallAnswer> {
  for (let attempt = 0; ; attempt += 1) {
    const left = options.deadline - options.now();
    if (left <= 0)
      throw new StepFailure(504, "the request's deadline passed before the call", false);
    const timeoutMs = Math.max(1, Math.ceil(Math.min(left, options.attemptMs ?? Infinity)));
    try {
      return await callOnce(send, url, { ...options, timeoutMs });
    } catch (error) {
      const last =
        attempt >= options.retries || !(error instanceof StepFailure) || !error.retryable;
      if (last) throw error;
      const pause = 20 * 2 ** attempt * (0.5 + Math.random());
      if (options.now() + pause >= options.deadline) throw error;
      await sleep(pause, undefined, options.signal === undefined ? {} : { signal: options.signal });
    }
  }
}

export { callNode, StepFailure };
export type { CallAnswer };
