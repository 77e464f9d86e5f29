/**
 * The executor's HTTP/1.1 client against real servers: node:http (as the project's functions
 * serve) and raw sockets for the framings and closes node:http never sends.
 */
import { createServer } from 'node:http';
import type { Server as HttpServer } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { Server as NetServer, Socket } from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { CallTimeoutError, createHttpClient } from '../../../shared/http/index.js';
import { createGraphClient } from '../../../shared/mlgraph/index.js';
import { ResponseParser } from '../../../shared/mlgraph/http1-response.js';
import type { WireResponse } from '../../../shared/mlgraph/http1-response.js';
import { listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const opened: Array<{ close(): unknown }> = [];
afterEach(async () => {
  // Clients first: a server closes once its connections have.
  for (const thing of opened.splice(0).reverse()) await thing.close();
});

/** A node:http server echoing method, path, headers and body; the sockets it was reached on. */
async function echoServer(
  configure: (server: HttpServer) => void = () => {},
): Promise<Listening & { sockets: Set<Socket>; held: Array<() => void> }> {
  const sockets = new Set<Socket>();
  const held: Array<() => void> = [];
  const server = createServer((req, res) => {
    sockets.add(req.socket);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = () => {
        const body = JSON.stringify({
          method: req.method,
          url: req.url,
          body: Buffer.concat(chunks).toString('utf8'),
          header: req.headers['x-test'],
          host: req.headers.host,
        });
        res.writeHead(200, { 'content-type': 'application/json', 'x-answer': req.url ?? '' });
        res.end(body);
      };
      if (req.url === '/hold') held.push(answer);
      else answer();
    });
  });
  configure(server);
  const listening = await listen(server);
  opened.push(listening);
  return Object.assign(listening, { sockets, held });
}

/** A raw TCP server: `respond` gets each connection and the bytes so far. */
async function rawServer(
  respond: (socket: Socket, received: string) => void,
): Promise<{ url: string; connections: number }> {
  const state = { url: '', connections: 0 };
  const server: NetServer = createNetServer((socket) => {
    state.connections += 1;
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      respond(socket, received);
    });
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  state.url = `http://127.0.0.1:${address.port}`;
  opened.push({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
  return state;
}

/** A pipelining client, unless told otherwise (the executor's default is not to). */
function client(options: { pipeline?: boolean } = { pipeline: true }) {
  const c = createGraphClient(options);
  opened.push(c);
  return c;
}

const post = (body: string, headers: Record<string, string> = {}) => ({
  method: 'POST' as const,
  headers: { 'content-type': 'application/json', ...headers },
  body,
  timeoutMs: 5_000,
});

describe('the graph client (HTTP/1.1, pipelined)', () => {
  it('sends the calls of one turn back to back on one connection, each answered with its own', async () => {
    const server = await echoServer();
    const { send } = client();
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        send(`${server.url}/call/${i}?q=${i}`, post(`body ${i}`, { 'x-test': `t${i}` })),
      ),
    );
    expect(server.sockets.size).toBe(1);
    answers.forEach((answer, i) => {
      expect(answer.status).toBe(200);
      expect(answer.header('x-answer')).toBe(`/call/${i}?q=${i}`);
      expect(JSON.parse(answer.body.toString('utf8'))).toEqual({
        method: 'POST',
        url: `/call/${i}?q=${i}`,
        body: `body ${i}`,
        header: `t${i}`,
        host: server.url.replace('http://', ''),
      });
    });
  });

  it('by default (no pipelining), each call of a turn takes a connection of its own', async () => {
    const server = await echoServer();
    const { send } = client({});
    await Promise.all(Array.from({ length: 3 }, (_, i) => send(`${server.url}/c${i}`, post('x'))));
    expect(server.sockets.size).toBe(3);
    // Idle again, they are reused: no new connection for the next turn.
    await Promise.all(Array.from({ length: 3 }, (_, i) => send(`${server.url}/d${i}`, post('x'))));
    expect(server.sockets.size).toBe(3);
  });

  it('a later turn does not queue behind a call still out: it takes another connection', async () => {
    const server = await echoServer();
    const { send } = client();
    const slow = send(`${server.url}/hold`, post('slow'));
    await expect.poll(() => server.held.length).toBe(1);
    const quick = await send(`${server.url}/quick`, post('quick'));
    expect(quick.header('x-answer')).toBe('/quick');
    expect(server.sockets.size).toBe(2);
    server.held[0]!();
    expect((await slow).header('x-answer')).toBe('/hold');
  });

  it('GET without a body; a large body in both directions', async () => {
    const server = await echoServer();
    const { send } = client();
    const get = await send(`${server.url}/g`, { method: 'GET', headers: {}, timeoutMs: 5_000 });
    expect(JSON.parse(get.body.toString('utf8'))).toMatchObject({ method: 'GET', body: '' });
    const big = 'é'.repeat(300_000);
    const answer = await send(`${server.url}/big`, post(big));
    expect((JSON.parse(answer.body.toString('utf8')) as { body: string }).body).toBe(big);
  });

  it('reads chunked answers, a body ended by the close, and skips a 100 Continue', async () => {
    const chunked = await rawServer((socket, received) => {
      if (!received.endsWith('\r\n\r\n')) return;
      socket.write(
        'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-a: 1\r\n\r\n' +
          '5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\ntrailer: x\r\n\r\n',
      );
    });
    const untilClose = await rawServer((socket) => {
      socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\n\r\nno upstream');
    });
    const { send } = client();
    const a = await send(`${chunked.url}/`, { method: 'GET', headers: {}, timeoutMs: 5_000 });
    expect([a.status, a.header('x-a'), a.body.toString()]).toEqual([200, '1', 'hello, world']);
    const b = await send(`${untilClose.url}/`, { method: 'GET', headers: {}, timeoutMs: 5_000 });
    expect([b.status, b.body.toString()]).toEqual([502, 'no upstream']);
  });

  it('calls pipelined behind an answer that closes the connection go again on a new one', async () => {
    const server = await rawServer((socket, received) => {
      // Answers the first request only, saying it closes; the others were never read.
      if (!received.includes('\r\n\r\n')) return;
      const path = /^GET (\S+)/.exec(received)![1]!;
      socket.end(
        `HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: ${path.length}\r\n\r\n${path}`,
      );
    });
    const { send } = client();
    const get = (path: string) =>
      send(`${server.url}${path}`, { method: 'GET', headers: {}, timeoutMs: 5_000 });
    const answers = await Promise.all([get('/a'), get('/b'), get('/c')]);
    expect(answers.map((a) => a.body.toString())).toEqual(['/a', '/b', '/c']);
    expect(server.connections).toBe(3);
  });

  it('a connection that dies mid-answer fails its calls (no answer), not the next ones', async () => {
    let first = true;
    const server = await rawServer((socket) => {
      if (first) {
        first = false;
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial');
        socket.destroy();
        return;
      }
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    });
    const { send } = client();
    await expect(send(`${server.url}/`, post('x'))).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect((await send(`${server.url}/`, post('x'))).body.toString()).toBe('ok');
  });

  it('a call past its time is a CallTimeoutError; a connection left with only such calls closes', async () => {
    const server = await echoServer();
    const { send } = client();
    const started = performance.now();
    const late = send(`${server.url}/hold`, { ...post('x'), timeoutMs: 50 });
    await expect(late).rejects.toBeInstanceOf(CallTimeoutError);
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    const [socket] = [...server.sockets];
    await expect.poll(() => socket?.destroyed).toBe(true);
    // Another call with a longer time is not affected by the one that expired.
    expect((await send(`${server.url}/ok`, post('x'))).status).toBe(200);
  });

  it('an abort answers every call on the signal at once with its reason', async () => {
    const server = await echoServer();
    const { send } = client();
    const controller = new AbortController();
    const calls = [1, 2].map(() =>
      send(`${server.url}/hold`, { ...post('x'), signal: controller.signal }),
    );
    await expect.poll(() => server.held.length).toBe(2);
    const reason = new Error('the request failed elsewhere');
    controller.abort(reason);
    for (const call of calls) await expect(call).rejects.toBe(reason);
    await expect(send(`${server.url}/x`, { ...post('x'), signal: controller.signal })).rejects.toBe(
      reason,
    );
  });

  it('a refused connection and an unreadable answer fail their calls saying so', async () => {
    const garbled = await rawServer((socket) => socket.write('SMTP ready\r\n\r\n'));
    // A port nothing listens on any more.
    const gone = createServer();
    const { port } = new URL((await listen(gone)).url);
    await new Promise((resolve) => gone.close(resolve));
    const { send } = client();
    await expect(send(`${garbled.url}/`, post('x'))).rejects.toThrow(/unreadable answer/);
    await expect(send(`http://127.0.0.1:${port}/`, post('x'))).rejects.toMatchObject({
      code: 'ECONNREFUSED',
    });
  });

  it('closed, it fails the calls out and takes no new one', async () => {
    const server = await echoServer();
    const c = createGraphClient();
    const out = c.send(`${server.url}/hold`, post('x'));
    await expect.poll(() => server.held.length).toBe(1);
    c.close();
    await expect(out).rejects.toThrow(/closed/);
    await expect(c.send(`${server.url}/x`, post('x'))).rejects.toThrow(/closed/);
  });

  it('refuses a header that would break the framing, and an https-less other scheme', async () => {
    const server = await echoServer();
    const { send } = client();
    await expect(
      send(`${server.url}/`, post('x', { 'x-test': 'a\r\nx-injected: 1' })),
    ).rejects.toThrow(/CR, LF or NUL/);
    await expect(send('ftp://127.0.0.1/', post('x'))).rejects.toThrow(/not an http: URL/);
  });

  it('a keep-alive connection the server closed while idle is not used again', async () => {
    const server = await rawServer((socket, received) => {
      if (!received.endsWith('\r\n\r\n')) return;
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      // Idle: the server closes it, as node:http does after keepAliveTimeout.
      setTimeout(() => socket.end(), 20);
    });
    const { send } = client();
    const get = () => send(`${server.url}/`, { method: 'GET', headers: {}, timeoutMs: 5_000 });
    expect((await get()).body.toString()).toBe('ok');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await get()).body.toString()).toBe('ok');
    expect(server.connections).toBe(2);
  });

  it('a request a reused connection took and closed on unanswered goes again once', async () => {
    const server = await rawServer((socket, received) => {
      const requests = received.split('\r\n\r\n').length - 1;
      // The first request on a connection is answered; a second one finds it closing.
      if (requests === 1) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      else if (requests === 2) socket.destroy();
    });
    const { send } = client();
    const get = () => send(`${server.url}/`, { method: 'GET', headers: {}, timeoutMs: 5_000 });
    expect((await get()).body.toString()).toBe('ok');
    expect((await get()).body.toString()).toBe('ok');
    expect(server.connections).toBe(2);
  });
});

describe('reading answers back to back', () => {
  const stream = Buffer.from(
    'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Twice: a\r\nx-twice: b\r\n\r\nfirst' +
      'HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3\r\nsec\r\n3\r\nond\r\n0\r\n\r\n' +
      'HTTP/1.1 204 No Content\r\n\r\n' +
      'HTTP/1.0 200 OK\r\ncontent-length: 5\r\n\r\nfifth',
  );
  const read = (pieces: Buffer[]) => {
    const got: WireResponse[] = [];
    const parser = new ResponseParser((r) => got.push(r));
    for (const piece of pieces) parser.feed(piece);
    return got.map((r) => ({
      status: r.status,
      twice: r.headers['x-twice'],
      body: r.body.toString(),
      closes: r.closes,
    }));
  };
  const expected = [
    { status: 200, twice: 'a', body: 'first', closes: false },
    { status: 404, twice: undefined, body: 'second', closes: false },
    { status: 204, twice: undefined, body: '', closes: false },
    { status: 200, twice: undefined, body: 'fifth', closes: true },
  ];

  it('the same answers whether they come in one read or a byte at a time', () => {
    expect(read([stream])).toEqual(expected);
    expect(read([...stream].map((b) => Buffer.from([b])))).toEqual(expected);
    for (const cut of [3, 20, 70, 90, 130]) {
      expect(read([stream.subarray(0, cut), stream.subarray(cut)])).toEqual(expected);
    }
  });

  it('malformed input is an error', () => {
    const parser = new ResponseParser(() => {});
    expect(() => parser.feed(Buffer.from('SMTP ready\r\n\r\n'))).toThrow(/status line/);
    const chunked = new ResponseParser(() => {});
    expect(() =>
      chunked.feed(Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n')),
    ).toThrow(/chunk size/);
  });
});

describe('the node:http client (https: calls, the aggregator)', () => {
  it('one timer for all calls: each call times out at its own deadline, the others answer', async () => {
    const server = await echoServer();
    const http = createHttpClient();
    opened.push(http);
    const started = performance.now();
    const ended = (p: Promise<unknown>) =>
      p.then(
        () => ({ ok: true, at: performance.now() - started }),
        (e: unknown) => ({ ok: !(e instanceof CallTimeoutError), at: performance.now() - started }),
      );
    const [long, short, answered] = await Promise.all([
      ended(http.send(`${server.url}/hold`, { ...post('x'), timeoutMs: 200 })),
      ended(http.send(`${server.url}/hold`, { ...post('x'), timeoutMs: 40 })),
      // Its deadline is not what is tested (a loaded machine can take 10 ms to answer).
      ended(http.send(`${server.url}/now`, { ...post('x'), timeoutMs: 5_000 })),
    ]);
    expect(answered.ok).toBe(true);
    expect([short.ok, long.ok]).toEqual([false, false]);
    expect(short.at).toBeGreaterThanOrEqual(38);
    expect(short.at).toBeLessThan(long.at);
    expect(long.at).toBeGreaterThanOrEqual(195);
  });
});
