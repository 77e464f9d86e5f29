/**
 * A Redis that fails over in the middle of a test: Sentinel (the master is SIGKILLed, a sentinel
 * quorum promotes the replica, the old master comes back as its replica) or Redis Cluster (the
 * master holding the test's hot slot is SIGKILLed and its replica takes the slots). The clients
 * are made from environment variables exactly as a function makes its own.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../../shared/config/index.js';
import { UnavailableError } from '../../shared/errors/index.js';
import { requireRedis, waitReady } from '../../shared/redis/index.js';
import type { RedisClient } from '../../shared/redis/index.js';
import { startRedisCluster, startRedisSentinel } from '../../local/redis-topologies.js';

type Topology = 'sentinel' | 'cluster';

interface FailoverRedis {
  readonly topology: Topology;
  /** This run's key prefix: every client shares it, as a function's replicas do. */
  readonly prefix: string;
  /** The environment a function gets (REDIS_SENTINELS… or REDIS_CLUSTER_NODES, the prefix). */
  env(waitReplicas: number): Record<string, string>;
  /** A client as a function makes it from `env(waitReplicas)`, ready; `name` for `alive`. */
  client(waitReplicas: number, name?: string): Promise<RedisClient>;
  /**
   * Throws, naming them, once clients have ended for good (ioredis status 'end': every command
   * fails and it never reconnects), which retrying would only wait out.
   */
  alive(): void;
  /**
   * SIGKILLs the master that holds `key` (without the prefix; on Sentinel, the master) and
   * resolves once a replica has taken over. Counted in `failovers`.
   */
  failover(key: string): Promise<void>;
  readonly failovers: number;
  /** Stops everything; fails if a client ended for good on the way (it would never recover). */
  stop(): Promise<void>;
}

async function startFailoverRedis(topology: Topology): Promise<FailoverRedis> {
  const prefix = `failover-${randomUUID()}:`;
  const clients: RedisClient[] = [];
  let stopping = false;
  const ended: string[] = [];
  let failovers = 0;
  const located =
    topology === 'sentinel'
      ? await startRedisSentinel().then((s) => ({
          where: {
            REDIS_SENTINELS: s.sentinels.map((n) => `${n.host}:${n.port}`).join(','),
            REDIS_SENTINEL_NAME: s.name,
          },
          failover: async () => void (await s.failover()),
          stop: () => s.stop(),
        }))
      : await startRedisCluster().then((c) => ({
          where: { REDIS_CLUSTER_NODES: c.nodes.map((n) => `${n.host}:${n.port}`).join(',') },
          failover: async (key: string) => {
            const master = await c.masterOf(`${prefix}${key}`);
            await c.kill(master);
            await c.revive(master);
          },
          stop: () => c.stop(),
        }));
  const env = (waitReplicas: number) => ({
    ...located.where,
    REDIS_KEY_PREFIX: prefix,
    REDIS_WAIT_REPLICAS: String(waitReplicas),
    REDIS_WAIT_TIMEOUT_MS: '500',
  });
  const alive = () => {
    if (ended.length > 0) throw new Error(`redis clients ended for good: ${ended.join(', ')}`);
  };
  return {
    topology,
    prefix,
    env,
    async client(waitReplicas, name = `client ${clients.length + 1}`) {
      const client = requireRedis(loadConfig(env(waitReplicas)).redis, 'failover test', () => {});
      clients.push(client);
      client.on('end', () => {
        if (!stopping) ended.push(name);
      });
      await waitReady(client, 20_000);
      return client;
    },
    alive,
    async failover(key) {
      await located.failover(key);
      failovers += 1;
    },
    get failovers() {
      return failovers;
    },
    async stop() {
      stopping = true;
      for (const client of clients) client.disconnect();
      await located.stop();
      alive();
    },
  };
}

/** What a failover scenario reports (the figures). */
interface FailoverFigures {
  scenario: string;
  topology: Topology;
  operations: number;
  failovers: number;
  lost: number;
  doubled: number;
  /** 503s answered (and retried by the caller, as Knative redelivers). */
  unavailable: number;
}

/** One line per scenario in the run's output, for the table. */
function report(figures: FailoverFigures): void {
  console.log(`failover figures ${JSON.stringify(figures)}`);
}

/**
 * Runs `attempt` until it succeeds, as a caller that is answered 503 retries (Knative redelivers):
 * counts the 503s in `counter`; any other failure is thrown.
 */
async function retrying<T>(
  attempt: () => Promise<T | 'unavailable'>,
  counter: { unavailable: number },
  deadlineMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const outcome = await attempt().catch((err: unknown) => {
      if (err instanceof UnavailableError) return 'unavailable' as const;
      throw err;
    });
    if (outcome !== 'unavailable') return outcome;
    counter.unavailable += 1;
    if (Date.now() > deadline) throw new Error('still unavailable after the deadline');
    await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
  }
}

/** Runs `work(i)` for i < total, `width` at a time; `at(done)` is told after each one. */
async function pool(
  total: number,
  width: number,
  work: (i: number) => Promise<void>,
  at: (done: number) => void,
): Promise<void> {
  let next = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < total) {
        await work(next++);
        at((done += 1));
      }
    }),
  );
}

export { startFailoverRedis, report, retrying, pool };
export type { FailoverRedis, FailoverFigures, Topology };
