/**
 * The ceilings the HTTP benches measure against in the same run, each meant for a child process
 * of its own: `node`, a bare `node:http` hello (no framework at all), and `ff`, a bare
 * functions-framework HTTP function served the stock way (its own Express server).
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { http } from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';

/** The least a server can do: answer at once (Node reads and drops the body it did not read). */
function nodeHello(): Server {
  return createServer((_req, res) => {
    res.end('hello');
  });
}

function frameworkHello(): Server {
  http('hello', (_req, res) => {
    res.send('hello');
  });
  return getTestServer('hello');
}

export { nodeHello, frameworkHello };
