/**
 * A private redis-server for tests, benchmarks and the local stack when no REDIS_URL is given:
 * spawned on a free port with no persistence, stoppable and restartable on the same port so
 * tests can take Redis away and bring it back.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
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
  /** The running process (undefined while stopped). */
  readonly pid: number | undefined;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * Starts redis-server (the binary `make test` ensures is installed) on a free port; with
 * `password`, clients must AUTH (requirepass), as the cluster's Redis requires; `args` are more
 * configuration (e.g. the ACL users of knative/redis/statefulset.yaml).
 */
async function startRedisServer(
  options: {
    password?: string;
    args?: readonly string[];
    dataDir?: string;
    /** A configuration file read first (a sentinel's, which the sentinel rewrites). */
    configFile?: string;
  } = {},
): Promise<RedisServer> {
  const auth = options.password === undefined ? [] : ['--requirepass', options.password];
  // With a data directory, an append-only file (fsync every second) keeps the data across a
  // restart; stopping is then a SIGTERM, on which redis-server flushes it.
  const persistence =
    options.dataDir === undefined
      ? ['--save', '', '--appendonly', 'no']
      : ['--dir', options.dataDir, '--save', '', '--appendonly', 'yes'];
  if (options.dataDir !== undefined) mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const port = await freePort();
  let child: ChildProcess | undefined;
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child?.exitCode === null ? child.pid : undefined;
    },
    async start() {
      child = spawn(
        'redis-server',
        [
          ...(options.configFile === undefined ? [] : [options.configFile]),
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          ...persistence,
          ...auth,
          ...(options.args ?? []),
        ],
        { stdio: 'ignore' },
      );
      const failed = once(child, 'error').then(([err]) => {
        throw new Error(
          (err as NodeJS.ErrnoException).code === 'ENOENT'
            ? 'redis-server is not installed: install it (apt-get install -y redis-server, or make redis-server) or set REDIS_URL to a running Redis'
            : `cannot start redis-server (${String(err)}): install it (apt-get install -y redis-server) or set REDIS_URL`,
        );
      });
      await Promise.race([accepting(port, Date.now() + 10_000), failed]);
    },
    async stop() {
      if (child === undefined || child.exitCode !== null) return;
      const exited = once(child, 'exit');
      if (options.dataDir === undefined) child.kill('SIGKILL');
      else {
        child.kill('SIGTERM');
        const stuck = setTimeout(() => child?.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(stuck);
      }
      await exited;
      child = undefined;
    },
  };
  await server.start();
  return server;
}

/**
 * Fails at once, naming the URL (without its password), when nothing answers Redis there: a
 * person should not wait for a readiness timeout to learn that REDIS_URL is wrong.
 */
async function checkRedisReachable(url: string, timeoutMs = 3_000): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`REDIS_URL is not a URL: use redis://host:port`);
  }
  const shown = `${parsed.protocol}//${parsed.hostname}:${parsed.port || 6379}`;
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:')
    throw new Error(`REDIS_URL ${shown}: only redis:// and rediss:// are served`);
  if (parsed.protocol === 'rediss:') return; // TLS: the clients check it; a probe would need certs
  const reply = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(parsed.port || 6379), parsed.hostname);
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (chunk: Buffer) => {
      socket.end();
      resolve(chunk.toString('utf8'));
    });
    socket.once('error', reject);
  }).catch((err: unknown) => {
    const reason = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : '');
    throw new Error(
      `Redis at ${shown} (REDIS_URL) is unreachable (${reason}): start it there, or unset REDIS_URL to run a private redis-server`,
    );
  });
  // +PONG, or -NOAUTH when it wants the password the URL carries: either way Redis answers.
  if (!reply.startsWith('+') && !reply.startsWith('-'))
    throw new Error(`something at ${shown} (REDIS_URL) answers, but not as Redis does`);
}

export { checkRedisReachable, freePort, startRedisServer };
export type { RedisServer };
