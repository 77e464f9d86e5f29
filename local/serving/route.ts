/**
 * A Knative Service's stable local address, as its Route gives it in a cluster: a small HTTP
 * reverse proxy on 127.0.0.1, on a port chosen once per Service, that forwards each request
 * (method, path, headers, body streamed both ways) to the revision traffic currently goes to.
 * With no ready revision it answers 503 with the reason in plain text (as a Route does for a
 * Service scaled to zero or absent), and 502 when the revision's port cannot be reached.
 */
import { createServer, request } from 'node:http';
import type {
  IncomingHttpHeaders,
  IncomingMessage,
  OutgoingHttpHeaders,
  Server,
  ServerResponse,
} from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { pipeline } from 'node:stream';

/** Where a request goes now: a ready revision's port, or why there is none. */
type RouteTarget = { revision: string; port: number } | { unavailable: string };

interface RouteOptions {
  namespace: string;
  name: string;
  port: number;
  /** Asked for each request. */
  target(): RouteTarget;
  report(err: Error): void;
}

/** Headers that belong to one connection and are not forwarded (RFC 9110, section 7.6.1). */
const hopByHop = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const bindRetryMs = 1000;

function forwardable(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = (headers.connection ?? '')
    .split(',')
    .map((token) => token.trim().toLowerCase())
    .filter((token) => token !== '');
  const out: OutgoingHttpHeaders = {};
  for (const [key, value] of Object.entries(headers)) {
    if (value !== undefined && !hopByHop.has(key) && !named.includes(key)) out[key] = value;
  }
  return out;
}

function answer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' }).end(`${text}\n`);
}

/**
 * A port no other listener holds now, and not one of `taken`, chosen synchronously: a listener
 * on every address binds in the call (one given a host resolves it first), so its port is known
 * at once; it is closed right away and the route listens on 127.0.0.1 at that port.
 */
function reservePort(taken: ReadonlySet<number>): number {
  for (let i = 0; i < 20; i++) {
    const probe = createNetServer();
    probe.on('error', () => {});
    probe.listen(0);
    const address = probe.address();
    probe.close();
    if (address !== null && typeof address !== 'string' && !taken.has(address.port))
      return address.port;
  }
  throw new Error('no free port found for a route');
}

class Route {
  readonly namespace: string;
  readonly name: string;
  readonly port: number;
  readonly url: string;
  readonly #options: RouteOptions;
  #server: Server | undefined;
  /** The server's listen() has not yet succeeded or failed. */
  #binding = false;
  #retry: NodeJS.Timeout | undefined;
  #warned = false;

  constructor(options: RouteOptions) {
    this.#options = options;
    this.namespace = options.namespace;
    this.name = options.name;
    this.port = options.port;
    this.url = `http://127.0.0.1:${options.port}`;
  }

  get open(): boolean {
    return this.#server !== undefined;
  }

  /**
   * Starts listening (again) on the route's port; nothing if it is open. A port someone else
   * took while the route was closed is retried every second (reported once): the URL is kept.
   */
  listen(): void {
    if (this.#server !== undefined) return;
    const server = createServer((req, res) => this.#forward(req, res));
    this.#server = server;
    const bind = () => {
      this.#retry = undefined;
      if (this.#server !== server) return;
      this.#binding = true;
      server.listen(this.port, '127.0.0.1');
    };
    server.on('listening', () => {
      this.#binding = false;
      this.#warned = false;
    });
    server.on('error', (err: NodeJS.ErrnoException) => {
      this.#binding = false;
      if (this.#server !== server) return;
      if (!this.#warned || err.code !== 'EADDRINUSE')
        this.#options.report(
          new Error(
            `route of Knative Service ${this.namespace}/${this.name} on ${this.url}: ${err.message}${err.code === 'EADDRINUSE' ? ' (retrying)' : ''}`,
          ),
        );
      if (err.code === 'EADDRINUSE') {
        this.#warned = true;
        this.#retry = setTimeout(bind, bindRetryMs);
        this.#retry.unref();
      }
    });
    bind();
  }

  /** Stops listening and ends every connection, requests in flight included. */
  async close(): Promise<void> {
    const server = this.#server;
    if (server === undefined) return;
    this.#server = undefined;
    clearTimeout(this.#retry);
    if (this.#binding) {
      await new Promise<void>((resolve) => {
        server.once('listening', resolve);
        server.once('error', () => resolve());
      });
    }
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections();
    await closed;
  }

  #forward(req: IncomingMessage, res: ServerResponse): void {
    const target = this.#options.target();
    if ('unavailable' in target) {
      req.resume();
      answer(res, 503, target.unavailable);
      return;
    }
    const upstream = request({
      host: '127.0.0.1',
      port: target.port,
      method: req.method,
      path: req.url,
      headers: forwardable(req.headers),
      agent: false,
    });
    upstream.on('response', (reply) => {
      res.writeHead(reply.statusCode ?? 502, reply.statusMessage, forwardable(reply.headers));
      // A reply cut short ends the client's response short too.
      pipeline(reply, res, () => {});
    });
    upstream.on('error', (err) => {
      req.unpipe(upstream);
      req.resume();
      if (res.headersSent || res.destroyed) res.destroy();
      else
        answer(
          res,
          502,
          `Knative Service ${this.namespace}/${this.name}: revision ${target.revision} cannot be reached: ${err.message}`,
        );
    });
    // The client went away: so does the request to the revision.
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }
}

export { Route, reservePort };
export type { RouteOptions, RouteTarget };
