/**
 * The graph executor's calls to its nodes over plain HTTP/1.1 on net sockets (https: goes by
 * node:http's client), without node:http's per-request objects (ClientRequest, IncomingMessage,
 * the agent's bookkeeping). The calls made in one turn of the event loop are written after the
 * turn, one write per connection. By default each call takes an idle keep-alive connection of
 * its server, or a new one while fewer than `maxSockets` are open. With `pipeline: true` the
 * calls of a turn to the same server go back to back on one connection (pipelined) in one
 * system call, so the server reads them in one read (a model server of this project runs what
 * it reads in one turn as one batch); a server that serves a connection's requests one at a
 * time (Go's net/http, a Knative queue-proxy) serves such a batch in turn.
 *
 * Per call there is no timer and no listener: one timer per client wakes at the earliest
 * deadline of the calls out, and one abort listener per signal, however many calls share it. A
 * call whose time ran out or whose signal fired is answered at once (CallTimeoutError, the
 * signal's reason); its answer, when it comes, is read and dropped, and a connection that holds
 * only such calls is closed. Requests the server closed the connection before answering
 * (`connection: close` on an earlier answer, or a reused connection found closed) go again once
 * on another: the executor's calls are idempotent per prediction id.
 */
import { CallTimeoutError, createHttpClient, deadlineBook } from '../http/index.js';
import type { HttpAnswer, HttpCall, HttpSend } from '../http/index.js';
import { Connection } from './http1-connection.js';
import type { Call, ConnectionOwner } from './http1-connection.js';

interface Target {
  origin: Origin;
  path: string;
}

/** Header names and values that would break the request's framing. */
const unsafe = /[\r\n\0]/;

class Origin implements ConnectionOwner {
  private readonly connections: Connection[] = [];
  private waiting: Call[] = [];

  constructor(
    private readonly client: Client,
    readonly host: string,
    readonly port: number,
  ) {}

  enqueue(call: Call): void {
    if (this.waiting.length === 0) this.client.flushSoon(this);
    this.waiting.push(call);
  }

  /** Calls a closed connection left unanswered, on another (once each: see Connection). */
  resend(calls: readonly Call[]): void {
    for (const call of calls) {
      if (call.state === 'over') continue;
      call.state = 'waiting';
      this.enqueue(call);
    }
  }

  /** The calls of this turn, on as few connections as the setting allows. */
  flush(): void {
    const calls = this.waiting.filter((c) => c.state === 'waiting');
    this.waiting = [];
    if (calls.length === 0) return;
    if (this.client.pipeline) {
      this.connection().write(calls);
      return;
    }
    for (const call of calls) this.connection().write([call]);
  }

  settle(call: Call, answer: () => void): void {
    this.client.settle(call, answer);
  }

  forget(connection: Connection): void {
    const at = this.connections.indexOf(connection);
    if (at >= 0) this.connections.splice(at, 1);
  }

  dropAbandoned(): void {
    for (const connection of this.connections) connection.dropIfAbandoned();
  }

  close(): void {
    for (const connection of [...this.connections]) connection.socket.destroy();
  }

  /** An idle connection, a new one while under the limit, else the least busy. */
  private connection(): Connection {
    let best: Connection | undefined;
    for (const c of this.connections) {
      if (c.closing) continue;
      if (c.sent.length === 0) return c;
      if (best === undefined || c.sent.length < best.sent.length) best = c;
    }
    if (best !== undefined && this.connections.length >= this.client.maxSockets) return best;
    const fresh = new Connection(this, this.host, this.port);
    this.connections.push(fresh);
    return fresh;
  }
}

class Client {
  private readonly origins = new Map<string, Origin>();
  /** Parsed URLs, by URL (a graph calls a few, again and again). */
  private readonly targets = new Map<string, Target>();
  private readonly flushing = new Set<Origin>();
  private flushScheduled = false;
  /** Calls out, failed when the client closes. */
  private readonly out = new Set<Call>();
  /** One timer for every call's deadline. */
  private readonly deadlines = deadlineBook();
  /** The calls sharing each signal: one listener per signal. */
  private readonly bySignal = new WeakMap<AbortSignal, Set<Call>>();
  private closed = false;

  constructor(
    readonly pipeline: boolean,
    readonly maxSockets: number,
  ) {}

  send(url: string, call: HttpCall): Promise<HttpAnswer> {
    const { signal } = call;
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    if (this.closed) return Promise.reject(closedError());
    let target: Target;
    let head: string;
    try {
      target = this.target(url);
      head = requestHead(call, target);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    return new Promise<HttpAnswer>((resolve, reject) => {
      const pending: Call = {
        head,
        body: call.body,
        expire: () => this.giveUp(pending, new CallTimeoutError(timeoutText(pending))),
        signal,
        state: 'waiting',
        resent: false,
        resolve,
        reject,
      };
      this.watch(pending, call.timeoutMs);
      target.origin.enqueue(pending);
    });
  }

  flushSoon(origin: Origin): void {
    this.flushing.add(origin);
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // After the loop has read everything that arrived this turn: one write per server.
    setImmediate(() => {
      this.flushScheduled = false;
      const origins = [...this.flushing];
      this.flushing.clear();
      for (const o of origins) o.flush();
    });
  }

  /** Ends a call once: its answer or failure, and it leaves the deadline and signal books. */
  settle(call: Call, answer: () => void): void {
    if (call.state === 'over') return;
    call.state = 'over';
    this.out.delete(call);
    this.deadlines.remove(call.expire);
    if (call.signal !== undefined) this.bySignal.get(call.signal)?.delete(call);
    answer();
  }

  /** Every call out fails (the client is closed), and no new one is taken. */
  close(): void {
    this.closed = true;
    this.deadlines.close();
    for (const call of [...this.out]) this.settle(call, () => call.reject(closedError()));
    for (const origin of this.origins.values()) origin.close();
  }

  private target(url: string): Target {
    const known = this.targets.get(url);
    if (known !== undefined) return known;
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:') throw new Error(`not an http: URL: ${url}`);
    const port = Number(parsed.port || 80);
    const key = `${parsed.hostname}:${port}`;
    let origin = this.origins.get(key);
    if (origin === undefined) {
      // [::1] as a URL host is ::1 to connect to.
      const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
      origin = new Origin(this, host, port);
      this.origins.set(key, origin);
    }
    const target = { origin, path: `${parsed.pathname}${parsed.search}` };
    // URLs with a prediction id in them (a remote join's) are not worth keeping.
    if (this.targets.size > 1_000) this.targets.clear();
    this.targets.set(url, target);
    return target;
  }

  private watch(call: Call, timeoutMs: number): void {
    this.out.add(call);
    this.deadlines.add(call.expire, timeoutMs);
    const { signal } = call;
    if (signal === undefined) return;
    let calls = this.bySignal.get(signal);
    if (calls === undefined) {
      const fresh = new Set<Call>();
      this.bySignal.set(signal, fresh);
      signal.addEventListener('abort', () => this.abortAll(fresh, signal), { once: true });
      calls = fresh;
    }
    calls.add(call);
  }

  private abortAll(calls: Set<Call>, signal: AbortSignal): void {
    for (const call of [...calls]) this.giveUp(call, signal.reason as Error);
  }

  private giveUp(call: Call, error: Error): void {
    this.settle(call, () => call.reject(error));
    for (const origin of this.origins.values()) origin.dropAbandoned();
  }
}

const closedError = () => new Error('the HTTP client is closed');

function timeoutText(call: Call): string {
  return `no answer by the call's deadline (${call.head.slice(0, call.head.indexOf(' HTTP/'))})`;
}

/** The request line and headers, with Host and the body's length. */
function requestHead(call: HttpCall, target: Target): string {
  const { origin } = target;
  let head = `${call.method} ${target.path} HTTP/1.1\r\nhost: ${origin.host}:${origin.port}\r\n`;
  for (const name in call.headers) {
    const value = call.headers[name]!;
    if (unsafe.test(name) || unsafe.test(value))
      throw new TypeError(`header ${name}: CR, LF or NUL in a header`);
    head += `${name}: ${value}\r\n`;
  }
  const length = call.body === undefined ? 0 : Buffer.byteLength(call.body);
  if (call.body !== undefined || call.method === 'POST') head += `content-length: ${length}\r\n`;
  return `${head}\r\n`;
}

/**
 * An HttpSend for the executor: plain http: on pipelined keep-alive connections, https: by
 * node:http's client.
 */
function createGraphClient(options: { pipeline?: boolean; maxSockets?: number } = {}): {
  send: HttpSend;
  close(): void;
} {
  const plain = new Client(options.pipeline ?? false, options.maxSockets ?? 64);
  const secure = createHttpClient(
    options.maxSockets === undefined ? {} : { maxSockets: options.maxSockets },
  );
  return {
    send: (url, call) =>
      url.startsWith('https:') ? secure.send(url, call) : plain.send(url, call),
    close() {
      plain.close();
      secure.close();
    },
  };
}

export { createGraphClient };
