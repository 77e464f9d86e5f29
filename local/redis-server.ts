/**
 * A private redis-server for tests, benchmarks and the local stack when no REDIS_URL is given:
 * spawned on a free port with no persistence, stoppable and restartable on the same port so
 * tests can take Redis away and bring it back.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, connect } from 'node:net';

/** A free TCP port on 127.0.0.1, as chosen by the kernel. */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  server.close();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function accepting(port: number, deadline: number): Promise<void> {
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis-server did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface RedisServer {
  port: number;
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * Starts redis-server (the binary `make test` ensures is installed) on a free port; with
 * `password`, clients must AUTH (requirepass), as the cluster's Redis requires; `args` are more
 * configuration (e.g. the ACL users of knative/redis/deployment.yaml).
 */
async function startRedisServer(
  options: { password?: string; args?: readonly string[] } = {},
): Promise<RedisServer> {
  const auth = options.password === undefined ? [] : ['--requirepass', options.password];
  const port = await freePort();
  let child: ChildProcess | undefined;
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      child = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          ...auth,
          ...(options.args ?? []),
        ],
        { stdio: 'ignore' },
      );
      const failed = once(child, 'error').then(([err]) => {
        throw new Error(
          `cannot start redis-server (${String(err)}): install it (apt-get install -y redis-server) or set REDIS_URL`,
        );
      });
      await Promise.race([accepting(port, Date.now() + 10_000), failed]);
    },
    async stop() {
      if (child === undefined || child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
      child = undefined;
    },
  };
  await server.start();
  return server;
}

export { freePort, startRedisServer };
export type { RedisServer };
