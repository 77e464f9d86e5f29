/**
 * A Service's local route on its own: what it forwards (method, path, headers, bodies streamed
 * both ways), 503 with no ready revision, 502 when the revision cannot be reached, and close.
 */
import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Route, reservePort } from '../../../local/serving/route.js';
import type { RouteTarget } from '../../../local/serving/route.js';

const closers: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function listen(server: Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A route whose target the test sets; errors it reports are collected. */
function route(target: () => RouteTarget): { route: Route; errors: Error[] } {
  const errors: Error[] = [];
  const created = new Route({
    namespace: 'ns',
    name: 'svc',
    port: reservePort(new Set()),
    target,
    report: (err) => errors.push(err),
  });
  created.listen();
  closers.push(() => created.close());
  return { route: created, errors };
}

/** Waits until the route accepts connections (its listen completes after the call). */
async function accepting(port: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`nothing listens on ${port}`);
}

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A request written in chunks (no content-length: chunked), with a fresh connection. */
function send(
  url: string,
  options: { method: string; path: string; headers?: Record<string, string> },
  chunks: readonly string[] = [],
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${options.path}`,
      { method: options.method, headers: options.headers ?? {}, agent: false },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    for (const chunk of chunks) req.write(chunk);
    req.end();
  });
}

describe('a Service route', () => {
  it('forwards method, path, headers and a streamed body both ways', async () => {
    const seen: Array<{ method?: string; url?: string; headers: IncomingHttpHeaders }> = [];
    const upstream = createServer((req, res) => {
      seen.push({ method: req.method, url: req.url, headers: req.headers });
      res.writeHead(207, 'Multi', { 'x-answer': 'yes', 'set-cookie': ['a=1', 'b=2'] });
      // The request's body comes back as it arrives, upper-cased.
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => res.write(chunk.toUpperCase()));
      req.on('end', () => res.end('!'));
    });
    const port = await listen(upstream);
    const { route: r, errors } = route(() => ({ revision: 'svc-00001', port }));
    expect(r.url).toBe(`http://127.0.0.1:${r.port}`);
    await accepting(r.port);

    const reply = await send(
      r.url,
      {
        method: 'PUT',
        path: '/a/b?c=d',
        headers: { 'x-custom': 'kept', connection: 'keep-alive, x-hop', 'x-hop': 'dropped' },
      },
      ['one ', 'two ', 'three'],
    );
    expect(reply.status).toBe(207);
    expect(reply.body).toBe('ONE TWO THREE!');
    expect(reply.headers['x-answer']).toBe('yes');
    expect(reply.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ method: 'PUT', url: '/a/b?c=d' });
    expect(seen[0]?.headers['x-custom']).toBe('kept');
    expect(seen[0]?.headers['host']).toBe(`127.0.0.1:${r.port}`);
    // Hop-by-hop headers stay on their connection.
    expect(seen[0]?.headers['x-hop']).toBeUndefined();
    expect(errors).toEqual([]);
  });

  it('drops the request to the revision when the client goes away', async () => {
    let arrived: () => void = () => {};
    let upstreamClosed: () => void = () => {};
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
    const upstream = createServer((_req, res) => {
      res.on('close', () => upstreamClosed());
      arrived(); // and no answer, ever
    });
    const port = await listen(upstream);
    const { route: r } = route(() => ({ revision: 'svc-00001', port }));
    await accepting(r.port);
    const client = request(`${r.url}/slow`, { agent: false });
    client.on('error', () => {});
    client.end();
    await reached;
    client.destroy();
    await closed;
  });

  it('answers 503 with the reason while there is no ready revision, then forwards', async () => {
    const upstream = createServer((_req, res) => res.end('up'));
    const port = await listen(upstream);
    let target: RouteTarget = { unavailable: 'Knative Service ns/svc has no ready revision' };
    const { route: r } = route(() => target);
    await accepting(r.port);
    const down = await send(r.url, { method: 'POST', path: '/x' }, ['a body that is drained']);
    expect(down.status).toBe(503);
    expect(down.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(down.body).toBe('Knative Service ns/svc has no ready revision\n');

    target = { revision: 'svc-00001', port };
    const up = await send(r.url, { method: 'GET', path: '/' });
    expect(up).toMatchObject({ status: 200, body: 'up' });
  });

  it('answers 502 when the revision cannot be reached', async () => {
    const closed = reservePort(new Set()); // nothing listens there
    const { route: r } = route(() => ({ revision: 'svc-00002', port: closed }));
    await accepting(r.port);
    const reply = await send(r.url, { method: 'GET', path: '/' });
    expect(reply.status).toBe(502);
    expect(reply.body).toMatch(
      /^Knative Service ns\/svc: revision svc-00002 cannot be reached: .*ECONNREFUSED/,
    );
  });

  it('stops listening on close and listens again on the same port', async () => {
    const { route: r } = route(() => ({ unavailable: 'none' }));
    await accepting(r.port);
    await r.close();
    expect(r.open).toBe(false);
    expect(await refused(r.port)).toBe(true);
    r.listen();
    await accepting(r.port);
    expect((await send(r.url, { method: 'GET', path: '/' })).status).toBe(503);
  });

  it('closed while its listen is on its way, does not listen', async () => {
    const { route: r } = route(() => ({ unavailable: 'none' }));
    await r.close();
    expect(await refused(r.port)).toBe(true);
  });

  it('reserves a port that is not taken', () => {
    const first = reservePort(new Set());
    expect(reservePort(new Set([first]))).not.toBe(first);
  });
});
