/**
 * shared/http/turn.ts over real HTTP: answers queued in one turn go out together at its end;
 * one whose client is gone is skipped, one whose end throws is reported and cut, one larger than
 * the socket takes at once is reported as unfinished, and none of them stops the others.
 */
import { createServer, request } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createTurnEnd } from '../../../shared/http/turn.js';

interface Got {
  status: number;
  body: string;
}

/** GET / with a connection of its own; resolves with the answer or rejects when cut. */
function get(port: number): Promise<Got> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** A server whose requests are held until `count` arrived, then handed to `answer` together. */
async function serveTogether(
  count: number,
  answer: (held: Array<{ req: IncomingMessage; res: ServerResponse }>) => void,
) {
  const held: Array<{ req: IncomingMessage; res: ServerResponse }> = [];
  const server = createServer((req, res) => {
    held.push({ req, res });
    if (held.length === count) answer(held.splice(0));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

describe('shared/http/turn: answers end together at the end of the turn', () => {
  const servers: Array<{ close(): void; closeAllConnections(): void }> = [];
  afterEach(() => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      server.close();
    }
  });

  it('ends every answer of a turn after the turn, in order, and none before', async () => {
    const end = createTurnEnd<number>(
      () => undefined,
      () => undefined,
    );
    const endedDuringTurn: boolean[] = [];
    const { server, port } = await serveTogether(3, (held) => {
      held.forEach(({ res }, i) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        end(res, `answer ${i}`, i);
      });
      endedDuringTurn.push(...held.map(({ res }) => res.writableEnded));
    });
    servers.push(server);
    const answers = await Promise.all([get(port), get(port), get(port)]);
    expect(endedDuringTurn).toEqual([false, false, false]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.map((a) => a.body).sort()).toEqual(['answer 0', 'answer 1', 'answer 2']);
  });

  it('skips an answer whose client is gone, reports one whose end throws, and ends the rest', async () => {
    const failed: Array<[number, unknown]> = [];
    const end = createTurnEnd<number>(
      () => undefined,
      (owner, err) => failed.push([owner, err]),
    );
    const { server, port } = await serveTogether(3, (held) => {
      held.forEach(({ res }) => res.writeHead(200));
      held[0]!.res.destroy();
      end(held[0]!.res, 'gone', 0);
      // Not text nor bytes: what a caller that skipped its checks could pass.
      end(held[1]!.res, 42 as unknown as string, 1);
      end(held[2]!.res, 'fine', 2);
    });
    servers.push(server);
    const answers = await Promise.allSettled([get(port), get(port), get(port)]);
    expect(answers.filter((a) => a.status === 'rejected')).toHaveLength(2);
    expect(answers.filter((a) => a.status === 'fulfilled').map((a) => a.value)).toEqual([
      { status: 200, body: 'fine' },
    ]);
    expect(failed).toHaveLength(1);
    expect(failed[0]![0]).toBe(1);
    expect(String(failed[0]![1])).toMatch(/ERR_INVALID_ARG_TYPE|must be of type string/);
  });

  it('tells of an answer still being written after its end, with its socket', async () => {
    const unfinished: Array<[number, unknown]> = [];
    const end = createTurnEnd<number>(
      (owner, socket) => unfinished.push([owner, socket]),
      () => undefined,
    );
    const big = new Uint8Array(32 << 20);
    const { server, port } = await serveTogether(1, ([only]) => {
      only!.res.writeHead(200, { 'content-length': String(big.byteLength) });
      end(only!.res, big, 7);
    });
    servers.push(server);
    const answer = await get(port);
    expect(answer.status).toBe(200);
    expect(unfinished).toHaveLength(1);
    expect(unfinished[0]![0]).toBe(7);
    expect(unfinished[0]![1]).not.toBeNull();
  });
});
