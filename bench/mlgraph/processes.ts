/**
 * The processes bench/mlgraph runs, each as the image runs it (the esbuild bundle, its own
 * process), and the one list that stops them all: at the end, on an error, and — should this
 * process die first — on its exit, so no member, executor or Redis outlives the run.
 */
import { fork, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { inferenceNodeOptions } from '../../shared/messages/worker-env.js';
import { freePort, startRedisServer } from '../../local/index.js';
import type { RedisServer } from '../../local/index.js';

const root = new URL('../../../', import.meta.url);
const bundle = fileURLToPath(new URL('dist/bundle/serve.mjs', root));

/** A running server: where it answers, and the process whose CPU the tables attribute to it. */
interface Running {
  base: string;
  pid: number;
}

class Fleet {
  private readonly children: ChildProcess[] = [];
  private redis: RedisServer | undefined;
  // Synchronous: the only kind of work an 'exit' listener can still do.
  private readonly onExit = () => {
    for (const child of this.children) if (child.exitCode === null) child.kill('SIGKILL');
  };

  constructor() {
    process.on('exit', this.onExit);
  }

  /** A private redis-server: fresh state (no router has learnt anything), and its pid for CPU. */
  async startRedis(): Promise<{ url: string; pid: number }> {
    this.redis = await startRedisServer();
    return { url: this.redis.url, pid: this.redis.pid! };
  }

  /** A function from the bundle, ready once `readyPath` answers 200. */
  async startFunction(
    what: string,
    env: Record<string, string>,
    readyPath = '/health/readiness',
  ): Promise<Running> {
    const port = await freePort();
    const child = spawn(process.execPath, [bundle], {
      stdio: ['ignore', 'ignore', 'inherit'],
      // Logging stays on (info, one line per request), as in production.
      env: { ...process.env, PORT: String(port), LOG_LEVEL: 'info', ...env },
    });
    this.children.push(child);
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}`);
      if (Date.now() > deadline) throw new Error(`${what} was not ready in 30 s`);
      const ready = await fetch(`${base}${readyPath}`).catch(() => undefined);
      await ready?.arrayBuffer();
      if (ready?.status === 200) return { base, pid: child.pid! };
      await sleep(20);
    }
  }

  /** cloud-infer serving one of the project's digit classifiers, as reconcile-tick deploys it. */
  startMember(modelName: string, file: string): Promise<Running> {
    return this.startFunction(
      `cloud-infer ${modelName}`,
      {
        FUNCTION_TARGET: 'cloud-infer',
        NODE_OPTIONS: inferenceNodeOptions,
        MODEL_URL: pathToFileURL(fileURLToPath(new URL(`models/${file}`, root))).href,
        MODEL_ROOT: fileURLToPath(new URL('models/', root)),
        MODEL_NAME: modelName,
        INFERENCE_THREADS: '1',
      },
      `/v2/models/${modelName}/ready`,
    );
  }

  /** The bare functions-framework hello of bench/edge-infer: the ceiling, in its own process. */
  async startHello(): Promise<Running> {
    const child = fork(new URL('../edge-infer/server.js', import.meta.url), ['ff'], {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    this.children.push(child);
    const [message] = (await once(child, 'message')) as [{ port: number }];
    return { base: `http://127.0.0.1:${message.port}`, pid: child.pid! };
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      this.children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGINT');
        // A graceful stop drains; one that hangs must not hold the benchmark's exit.
        const stuck = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(stuck);
      }),
    );
    await this.redis?.stop();
    process.off('exit', this.onExit);
  }
}

export { Fleet };
export type { Running };
