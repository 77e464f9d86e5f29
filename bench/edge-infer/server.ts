/**
 * The ceiling bench/edge-infer measures the edge worker against, in its own child process: a
 * bare functions-framework HTTP function. Sends { port } over IPC once listening.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { http } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';

http('hello', (_req, res) => {
  res.send('hello');
});
const server: Server = getTestServer('hello');
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
process.send?.({ port: address.port });
