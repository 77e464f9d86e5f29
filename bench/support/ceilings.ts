/**
 * The ceilings the HTTP benches measure against in the same run, each meant for a child process
 * of its own: `node`, a bare `node:http` hello (no framework at all), and `ff`, a bare
 * functions-framework HTTP function served the stock way (its own Express server). The framework
 * is imported by `ff` alone: once loaded it loads `domain`, whose patched EventEmitter.emit and
 * async hooks tax every server in the process, which the image's processes never load.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';

/** The least a server can do: answer at once (Node reads and drops the body it did not read). */
function nodeHello(): Server {
  return createServer((_req, res) => {
    res.end('hello');
  });
}

async function frameworkHello(): Promise<Server> {
  const { http } = await import('@google-cloud/functions-framework');
  const { getTestServer } = await import('@google-cloud/functions-framework/testing');
  http('hello', (_req, res) => {
    res.send('hello');
  });
  return getTestServer('hello');
}

export { nodeHello, frameworkHello };
