/**
 * The three servers bench/harness compares, one per child process so each gets a core of its
 * own: `node` is a bare `node:http` hello (the ceiling: no framework at all); `ff` is a bare
 * functions-framework HTTP function, served the stock way (its own Express server); `edgeai` is a
 * function built with shared/http, served by shared/http's front, that decodes the same 3 KB
 * binary CloudEvent, validates its data and replies with an event. Sends { port } over IPC once
 * listening, then answers each IPC message with its CPU time so far ({ cpuUs }).
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { frameworkHello, nodeHello } from '../support/ceilings.js';
import { z } from 'zod';
import { buildServer, defineFunction, onEvent } from '../../shared/http/index.js';
import { createTelemetry } from '../../shared/telemetry/index.js';

const mode = process.argv[2];

const node = nodeHello;
const ff = frameworkHello;

function edgeai(): Server {
  const definition = defineFunction({
    name: 'bench',
    events: [
      onEvent({
        type: 'io.edgeai.bench.requested',
        data: z.object({ node: z.string(), samples: z.array(z.number()).max(1024) }),
        replies: ['io.edgeai.bench.completed'],
        handle: async ({ data }) => ({
          kind: 'reply',
          event: {
            type: 'io.edgeai.bench.completed',
            data: { node: data.node, n: data.samples.length },
          },
        }),
      }),
    ],
  });
  // Logging stays on (info, one line per request), written to the child's stdout.
  const telemetry = createTelemetry({ functionName: 'bench', level: 'info' });
  return buildServer(definition, { telemetry, bodyLimitBytes: 1 << 20, readinessTimeoutMs: 1000 });
}

const servers: Record<string, () => Server | Promise<Server>> = { node, ff, edgeai };
const make = mode === undefined ? undefined : servers[mode];
if (make === undefined) throw new Error(`mode must be node, ff or edgeai, got ${mode}`);
const server = await make();
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
process.send?.({ port: address.port });
// The bench asks for this process's CPU time around each round (CPU per request).
process.on('message', () => {
  const { user, system } = process.cpuUsage();
  process.send?.({ cpuUs: user + system });
});
