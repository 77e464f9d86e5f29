/**
 * Outgoing HTTP for calls on a request's path (the graph executor's hops), on node:http with
 * keep-alive agents. Node's fetch costs about 0.2 ms of a loopback round trip where this costs
 * 0.05 ms (measured on the development machine), and a graph makes several such calls per request.
 * A call either answers (any status, the whole body read), or rejects: with `CallTimeoutError`
 * when its own time ran out (one timer per client, at the earliest deadline of the calls out),
 * with the signal's reason when the caller gave up, or with the socket's error. The graph
 * executor's plain-http calls go by its own pipelining client (shared/mlgraph/http1-client.ts);
 * this one carries its https: calls, the edge's offload to the cloud worker, the federated
 * trainer's calls, downstream-sync's deliveries to local controllers and every event sink's posts
 * (sinkPost).
 */
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { PayloadTooLargeError } from '../errors/index.js';
import type { SinkPost } from '../events/index.js';

interface HttpAnswer {
  status: number;
  /** A response header, lower-case name; the first value when repeated. */
  header(this: void, name: string): string | undefined;
  body: Buffer;
}

interface HttpCall {
  method: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  body?: Buffer | string | undefined;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** The largest answer body read: past it, declared or counted, PayloadTooLargeError. */
  maxBytes?: number | undefined;
}

type HttpSend = (url: string, call: HttpCall) => Promise<HttpAnswer>;

class CallTimeoutError extends Error {
  override readonly name = 'CallTimeoutError';
}

function answerOf(res: IncomingMessage, body: Buffer): HttpAnswer {
  return {
    status: res.statusCode ?? 0,
    header(name) {
      const value = res.headers[name];
      return Array.isArray(value) ? value[0] : value;
    },
    body,
  };
}

/**
 * Reads `res`'s body whole, or calls `tooLarge` (with the size declared, or "more than" the
 * limit) as soon as it is known to be over `limit` bytes, reading no further.
 */
function readWhole(
  res: IncomingMessage,
  limit: number,
  on: { read(body: Buffer): void; tooLarge(size: string): void },
): void {
  const declared = Number(res.headers['content-length'] ?? 0);
  if (declared > limit) return on.tooLarge(String(declared));
  const chunks: Buffer[] = [];
  let total = 0;
  res.on('data', (chunk: Buffer) => {
    if (total > limit) return;
    total += chunk.length;
    if (total > limit) on.tooLarge(`more than ${limit}`);
    else chunks.push(chunk);
  });
  res.on('end', () => {
    if (total <= limit) on.read(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  });
}

/** Whether an answer's status is a success (2xx). */
const succeeded = (status: number) => status >= 200 && status < 300;

/** `path` under a service's base URL, whether or not the base ends with "/". */
function endpoint(base: string, path: string): string {
  return new URL(path, base.endsWith('/') ? base : `${base}/`).href;
}

/**
 * The calls out and one timer for all of them, armed for the earliest deadline: a call costs
 * an entry in a set, not a timer of its own (most calls answer long before their deadline).
 */
function deadlineBook() {
  const out = new Map<() => void, number>();
  let timer: NodeJS.Timeout | undefined;
  let armedFor = Infinity;
  const arm = (deadline: number) => {
    if (timer !== undefined) clearTimeout(timer);
    armedFor = deadline;
    timer = setTimeout(expire, Math.max(0, deadline - performance.now()));
    timer.unref();
  };
  function expire() {
    timer = undefined;
    armedFor = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const [onExpiry, deadline] of [...out]) {
      if (deadline <= now + 0.5) {
        out.delete(onExpiry);
        onExpiry();
      } else next = Math.min(next, deadline);
    }
    if (next < Infinity) arm(next);
  }
  return {
    add(onExpiry: () => void, timeoutMs: number) {
      const deadline = performance.now() + timeoutMs;
      out.set(onExpiry, deadline);
      if (deadline < armedFor) arm(deadline);
    },
    remove(onExpiry: () => void) {
      out.delete(onExpiry);
    },
    close() {
      if (timer !== undefined) clearTimeout(timer);
      out.clear();
    },
  };
}

function createHttpClient(options: { maxSockets?: number } = {}): {
  send: HttpSend;
  close(): void;
} {
  const settings = { keepAlive: true, maxSockets: options.maxSockets ?? 256 };
  const agents = { http: new HttpAgent(settings), https: new HttpsAgent(settings) };
  const deadlines = deadlineBook();
  const send: HttpSend = (url, call) =>
    new Promise<HttpAnswer>((resolve, reject) => {
      const { signal } = call;
      if (signal?.aborted) return reject(signal.reason as Error);
      const secure = url.startsWith('https:');
      const body = call.body === undefined ? undefined : call.body;
      const headers =
        body === undefined
          ? call.headers
          : { ...call.headers, 'content-length': String(Buffer.byteLength(body)) };
      const req = (secure ? httpsRequest : httpRequest)(
        url,
        { method: call.method, headers, agent: secure ? agents.https : agents.http },
        (res) => {
          readWhole(res, call.maxBytes ?? Infinity, {
            read(body) {
              done();
              resolve(answerOf(res, body));
            },
            tooLarge(size) {
              const limit = `over the limit of ${call.maxBytes} bytes`;
              fail(new PayloadTooLargeError(`the answer is ${size} bytes, ${limit}`));
              req.destroy();
            },
          });
          res.on('error', fail);
        },
      );
      const expired = () =>
        req.destroy(new CallTimeoutError(`no answer within ${call.timeoutMs} ms`));
      deadlines.add(expired, call.timeoutMs);
      const onAbort = () => req.destroy(signal?.reason as Error);
      signal?.addEventListener('abort', onAbort, { once: true });
      function done() {
        deadlines.remove(expired);
        signal?.removeEventListener('abort', onAbort);
      }
      function fail(error: Error) {
        done();
        reject(error);
      }
      req.on('error', fail);
      req.end(body);
    });
  return {
    send,
    close() {
      deadlines.close();
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

/**
 * Event sinks' posts (shared/events createEventSink) on `send`: the bytes as they are (fetch copies
 * a byte body before sending it: 0.8 MB per trainer for a federated round's model), and no
 * WebAssembly HTTP parser to compile once fetch's is hot.
 */
function sinkPost(send: HttpSend): SinkPost {
  return async (url, { headers, body, timeoutMs }) => {
    const bytes =
      typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    const call = { method: 'POST', headers, body: bytes, timeoutMs, maxBytes: 1 << 20 } as const;
    return (await send(url, call)).status;
  };
}

export { createHttpClient, deadlineBook, endpoint, sinkPost, succeeded, CallTimeoutError };
export type { HttpSend, HttpAnswer, HttpCall };
