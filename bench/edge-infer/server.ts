/**
 * The servers bench/edge-infer measures, one per child process: `hello`, a bare
 * functions-framework HTTP function, and `edge`, the edge-infer function built by its own
 * factory from environment variables as in a container. Sends { port } over IPC once listening.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { http } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import edgeInfer from '../../functions/edge-infer/index.js';
import { loadConfig } from '../../shared/config/index.js';
import { buildServer } from '../../shared/http/index.js';
import { createTelemetry } from '../../shared/telemetry/index.js';

async function start(mode: string | undefined): Promise<Server> {
  if (mode === 'hello') {
    http('hello', (_req, res) => {
      res.send('hello');
    });
    return getTestServer('hello');
  }
  if (mode === 'edge') {
    const config = loadConfig();
    // Logging stays on (info, one line per request), as in production.
    const telemetry = createTelemetry({ functionName: 'edge-infer', level: config.logLevel });
    const instance = await edgeInfer({ config, telemetry });
    return buildServer(instance.definition, {
      telemetry,
      bodyLimitBytes: config.bodyLimitBytes,
      readinessTimeoutMs: config.readinessTimeoutMs,
    });
  }
  throw new Error(`mode must be hello or edge, got ${mode}`);
}

const server = await start(process.argv[2]);
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
if (address === null || typeof address === 'string') throw new Error('no address');
process.send?.({ port: address.port });
