/**
 * A body read in its turn (shared/http/server.ts, `bodyTurn`): the server does not read a
 * request's body until the definition's promise settles, serves other requests meanwhile, then
 * reads it whole; a client that leaves while its body waits is logged as gone and does not
 * hold the server; a turn that rejects answers 500. Over real HTTP.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer, defineFunction, onRawRequest } from '../../../shared/http/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { signal } from '../../support/signal.js';

const telemetry = capturedTelemetry('body-turn');
/** The turns handed out and not yet given, oldest first. */
const turns: Array<{ give: () => void; refuse: (err: Error) => void }> = [];
const waiting = signal();
const read: number[] = [];

const definition = defineFunction({
  name: 'body-turn',
  // Bodies of 1 KB and more wait for a turn the test gives.
  bodyTurn: (headers) =>
    Number(headers['content-length']) >= 1000
      ? new Promise<void>((give, refuse) => {
          turns.push({ give, refuse });
          waiting.changed();
        })
      : undefined,
  routes: [
    onRawRequest({
      method: 'POST',
      path: '/echo',
      handle: async ({ body }) => {
        read.push(body.bytes.length);
        return { kind: 'json', body: { bytes: body.bytes.length, sum: sum(body.bytes) } };
      },
    }),
  ],
});

function sum(bytes: Uint8Array): number {
  let total = 0;
  for (const b of bytes) total += b;
  return total;
}

/** A body of `bytes` bytes counting 0, 1, 2, ... mod 251. */
const counting = (bytes: number) => Buffer.from(Array.from({ length: bytes }, (_, i) => i % 251));

describe('shared/http: a body read in its turn', () => {
  const http = buildServer(definition, {
    telemetry,
    bodyLimitBytes: 4 << 20,
    readinessTimeoutMs: 200,
  });
  let server: Listening;
  // Connections the server saw close, and the log lines: both arrive on their own.
  let closed = 0;
  const seen = signal();
  http.on('connection', (socket: Socket) =>
    socket.once('close', () => {
      closed += 1;
      seen.changed();
    }),
  );
  const poll = setInterval(() => seen.changed(), 5);
  beforeAll(async () => {
    server = await listen(http);
  });
  afterAll(async () => {
    clearInterval(poll);
    await server.close();
  });

  const post = (body: Buffer) => fetch(`${server.url}/echo`, { method: 'POST', body });

  it('reads a large body only once its turn comes, serving a small request meanwhile', async () => {
    read.length = 0;
    const large = counting(1 << 20);
    const answer = post(large);
    await waiting.when(() => turns.length === 1);
    const small = await post(counting(100));
    expect(await small.json()).toEqual({ bytes: 100, sum: sum(counting(100)) });
    // The large request has not been read: only the small one reached the handler.
    expect(read).toEqual([100]);
    turns.shift()!.give();
    const res = await answer;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ bytes: large.length, sum: sum(large) });
    expect(read).toEqual([100, large.length]);
  });

  /**
   * Sends a request declaring a body of `bytes` bytes, `sent` of them, on a socket of its own, and
   * waits for its turn.
   */
  async function leaving(bytes: number, sent = bytes) {
    const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: ${bytes}\r\n\r\n`);
    socket.write(counting(sent));
    await waiting.when(() => turns.length === 1);
    return socket;
  }
  const gone = () => telemetry.lines.filter((l) => l['msg'] === 'client gone before the answer');

  it('logs a client that left while its whole body waited read, and keeps serving', async () => {
    const logged = gone().length;
    // 10 KB arrive in one read: the server goes on reading the socket and sees it close.
    const socket = await leaving(10_000);
    const before = closed;
    socket.destroy();
    await seen.when(() => closed > before);
    turns.shift()!.give();
    await seen.when(() => gone().length > logged);
    expect((await post(counting(10))).status).toBe(200);
  });

  it('logs a client that left halfway through a body that waited unread, and keeps serving', async () => {
    const logged = gone().length;
    // The socket is not read while the body waits: the server learns of the close once it reads.
    const socket = await leaving(200_000, 100_000);
    socket.destroy();
    turns.shift()!.give();
    await seen.when(() => gone().length > logged);
    expect((await post(counting(10))).status).toBe(200);
  });

  it('answers 500 when the turn fails', async () => {
    const answer = post(counting(100_000));
    await waiting.when(() => turns.length === 1);
    turns.shift()!.refuse(new Error('no turn'));
    const res = await answer;
    expect(res.status).toBe(500);
  });
});
