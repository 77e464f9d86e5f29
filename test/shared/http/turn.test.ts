/**
 * shared/http/turn.ts over real HTTP: answers queued in one turn go out together at its end,
 * and each owner hears how its answer ended: sent, its client gone (skipped), or its end thrown
 * (cut); none of them stops the others.
 */
import { createServer, request } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createTurnEnd } from '../../../shared/http/turn.js';
import type { Ended } from '../../../shared/http/turn.js';

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

  it('ends every answer of a turn after the turn, and none before', async () => {
    const heard: Array<[number, Ended]> = [];
    const end = createTurnEnd<number>((owner, how) => heard.push([owner, how]));
    const endedDuringTurn: boolean[] = [];
    const { server, port } = await serveTogether(3, (held) => {
      held.forEach(({ res }, i) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        end(res, `answer ${i}`, i);
      });
      endedDuringTurn.push(...held.map(({ res }) => res.writableEnded));
      expect(heard).toEqual([]);
    });
    servers.push(server);
    const answers = await Promise.all([get(port), get(port), get(port)]);
    expect(endedDuringTurn).toEqual([false, false, false]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(answers.map((a) => a.body).sort()).toEqual(['answer 0', 'answer 1', 'answer 2']);
    expect(heard).toEqual([0, 1, 2].map((owner) => [owner, { kind: 'sent' }]));
  });

  it('skips an answer whose client is gone, cuts one whose end throws, and ends the rest', async () => {
    const heard = new Map<number, Ended>();
    const end = createTurnEnd<number>((owner, how) => heard.set(owner, how));
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
    expect(heard.get(0)).toEqual({ kind: 'gone' });
    const failed = heard.get(1);
    expect(failed?.kind).toBe('failed');
    expect(String(failed?.kind === 'failed' ? failed.err : '')).toMatch(/ERR_INVALID_ARG_TYPE/);
    expect(heard.get(2)).toEqual({ kind: 'sent' });
  });
});
