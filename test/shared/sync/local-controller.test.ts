/**
 * The GC -> LC client over real HTTP (shared/http's client): what it sends, and what it makes of a
 * local controller that fails, never answers or answers too much (UnavailableError: the event
 * is redelivered).
 */
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { UnavailableError } from '../../../shared/errors/index.js';
import { createHttpClient } from '../../../shared/http/index.js';
import { createLocalControllerClient } from '../../../shared/sync/index.js';
import type { Task } from '../../../shared/sync/task.js';
import { listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const http = createHttpClient();
const client = createLocalControllerClient({ timeoutMs: 300, send: http.send });
let lc: Listening | undefined;

function task(operation: Task['operation']): Task {
  return {
    operation,
    namespace: 'team a',
    name: 'helmet',
    uid: 'u1',
    generation: 3,
    created: '2026-11-28T00:00:00Z',
    resource: { metadata: { name: 'helmet' } },
  };
}

async function localController(answer: (req: IncomingMessage, res: ServerResponse) => void) {
  lc = await listen(createServer(answer));
  return new URL(`${lc.url}/lc`);
}

afterEach(async () => {
  await lc?.close();
  lc = undefined;
});
afterAll(() => http.close());

describe('the local controller client', () => {
  it('posts an insert to <base>/<namespace>/jointinferenceservices/<name> with its version', async () => {
    const seen: Array<{ method?: string; url?: string; version?: string; body: string }> = [];
    const base = await localController((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const version = req.headers['x-edgeai-version'] as string;
        seen.push({ method: req.method, url: req.url, version, body });
        res.writeHead(204).end();
      });
    });
    await client.deliver(base, task('insert'), 'edge0');
    expect(seen).toEqual([
      {
        method: 'POST',
        url: '/lc/team%20a/jointinferenceservices/helmet',
        version: 'u1:3',
        body: JSON.stringify({ metadata: { name: 'helmet' } }),
      },
    ]);
  });

  it('takes 404 to a delete as done, and any other failure as retryable', async () => {
    let status = 404;
    const base = await localController((_req, res) => res.writeHead(status).end());
    await expect(client.deliver(base, task('delete'), 'edge0')).resolves.toBeUndefined();
    status = 500;
    await expect(client.deliver(base, task('delete'), 'edge0')).rejects.toThrow(
      /local controller of node edge0 answered 500 to DELETE/,
    );
    status = 404;
    await expect(client.deliver(base, task('insert'), 'edge0')).rejects.toBeInstanceOf(
      UnavailableError,
    );
  });

  it('gives up on a local controller that never answers after its timeout', async () => {
    const base = await localController(() => undefined);
    await expect(client.deliver(base, task('update'), 'edge0')).rejects.toThrow(
      /local controller of node edge0: no answer within 300 ms/,
    );
  });

  it('refuses an answer over 64 KiB without reading it all', async () => {
    const base = await localController((_req, res) => res.writeHead(200).end('x'.repeat(1 << 20)));
    await expect(client.deliver(base, task('insert'), 'edge0')).rejects.toThrow(
      /local controller of node edge0: the answer is more than 65536 bytes/,
    );
  });
});
