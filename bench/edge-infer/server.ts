/**
 * The two ceilings bench/edge-infer measures the edge worker against, each in its own child
 * process: `node` is a bare `node:http` hello (no framework at all), `ff` a bare
 * functions-framework HTTP function. Sends { port } over IPC once listening.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { http } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';

/** The least a server can do: answer at once (Node reads and drops the body it did not read). */
function node(): Server {
  return createServer((_req, res) => {
    res.end('hello');
  });
}

function ff(): Server {
  http('hello', (_req, res) => {
    res.send('hello');
  });
  return getTestServer('hello');
}

const servers: Record<string, () => Server> = { node, ff };
const mode = process.argv[2];
const make = mode === undefined ? undefined : servers[mode];
if (make === undefined) throw new Error(`mode must be node or ff, got ${mode}`);
const server = make();
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
process.send?.({ port: address.port });
