/**
 * The aset-scheduler as the container runs it — the esbuild bundle, `node dist/bundle/serve.mjs`
 * with FUNCTION_TARGET=aset-scheduler (bin/serve.ts: the function's factory builds the
 * definition with asetSchedulerDefinition, shared/http's buildServer serves it) — in its own
 * process on a free port, and a keep-alive HTTP client for it.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../../local/index.js';

const root = new URL('../../../../', import.meta.url);
const bundle = fileURLToPath(new URL('dist/bundle/serve.mjs', root));

interface Answer {
  status: number;
  text: string;
}

/** One HTTP exchange over `agent`'s kept-alive sockets; the body is read whole. */
function exchange(
  agent: Agent,
  port: number,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> =
      body === undefined
        ? {}
        : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', reject);
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface FunctionProcess {
  port: number;
  /** A client whose agent keeps up to `sockets` connections open. */
  client(sockets: number): {
    send(method: 'GET' | 'POST' | 'DELETE', path: string, body?: string): Promise<Answer>;
    close(): void;
  };
  stop(): Promise<void>;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGINT'); // bin/serve.ts drains and closes Redis and the ONNX session
  await exited;
}

/**
 * Starts the bundle with the production defaults (info logging, T = 25 s, lease grace 30 s),
 * its state under `keyPrefix` on `redisUrl`; resolves once GET /v1/scheduler answers 200.
 */
async function startFunction(redisUrl: string, keyPrefix: string): Promise<FunctionProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, [bundle], {
    // The image's working directory holds data/aset and models, as the repository root does.
    cwd: fileURLToPath(root),
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      PATH: process.env['PATH'],
      FUNCTION_TARGET: 'aset-scheduler',
      PORT: String(port),
      REDIS_URL: redisUrl,
      REDIS_KEY_PREFIX: keyPrefix,
      ASET_TOPOLOGY: 'full-edge',
      ASET_ENDPOINT_TEMPLATE: 'http://{variant}.{cluster}.example',
      LOG_LEVEL: 'info',
    },
  });
  const make = (sockets: number) => {
    const agent = new Agent({ keepAlive: true, maxSockets: sockets });
    return {
      send: (method: 'GET' | 'POST' | 'DELETE', path: string, body?: string) =>
        exchange(agent, port, method, path, body),
      close: () => agent.destroy(),
    };
  };
  const probe = make(1);
  try {
    for (let waited = 0; ; waited += 20) {
      if (child.exitCode !== null) throw new Error(`${bundle} exited with ${child.exitCode}`);
      if (waited > 30_000) throw new Error(`${bundle} did not answer within 30 s`);
      const answer = await probe.send('GET', '/v1/scheduler').catch(() => undefined);
      if (answer?.status === 200) break;
      await sleep(20);
    }
  } catch (error) {
    await stopChild(child);
    throw error;
  } finally {
    probe.close();
  }
  return { port, client: make, stop: () => stopChild(child) };
}

export { startFunction };
export type { Answer, FunctionProcess };
