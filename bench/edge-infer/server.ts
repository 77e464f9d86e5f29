/**
 * The two ceilings bench/edge-infer measures the edge worker against, each in its own child
 * process: `node` is a bare `node:http` hello (no framework at all), `ff` a bare
 * functions-framework HTTP function. Sends { port } over IPC once listening.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { frameworkHello, nodeHello } from '../support/ceilings.js';

const node = nodeHello;
const ff = frameworkHello;

const servers: Record<string, () => Server | Promise<Server>> = { node, ff };
const mode = process.argv[2];
const make = mode === undefined ? undefined : servers[mode];
if (make === undefined) throw new Error(`mode must be node or ff, got ${mode}`);
const server = await make();
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
process.send?.({ port: address.port });
