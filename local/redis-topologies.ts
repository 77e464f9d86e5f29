/**
 * The two Redis shapes an installation runs in production, from redis-server on free ports, for
 * the tests and benchmarks that must see them: Redis Cluster (3 masters, 3 replicas, made by
 * `redis-cli --cluster create`) and Sentinel (a master, a replica, three sentinels). A node can be
 * killed with SIGKILL, as a lost machine is, and the topology waits for Redis's own failover:
 * nothing here moves a slot or promotes a replica itself.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startRedisServer } from './redis-server.js';
import type { RedisServer } from './redis-server.js';

const run = promisify(execFile);

interface HostPort {
  host: string;
  port: number;
}

/** One redis-cli command against 127.0.0.1:port; its reply as text. */
async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], {
    timeout: 10_000,
  });
  return stdout.trim();
}

async function until<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`redis topology: ${what} not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A line of CLUSTER NODES: who it is, whether it is a healthy master, and its slot ranges. */
interface ClusterNodeLine {
  port: number;
  master: boolean;
  failed: boolean;
  ranges: Array<[number, number]>;
}

function parseClusterNodes(text: string): ClusterNodeLine[] {
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const fields = line.trim().split(' ');
      const flags = fields[2]!.split(',');
      const ranges = fields
        .slice(8)
        .filter((f) => !f.startsWith('['))
        .map((f): [number, number] => {
          const [from, to] = f.split('-').map(Number);
          return [from!, to ?? from!];
        });
      return {
        port: Number(fields[1]!.split('@')[0]!.split(':').pop()),
        master: flags.includes('master'),
        failed: flags.includes('fail') || flags.includes('fail?'),
        ranges,
      };
    });
}

interface RedisCluster {
  /** Seed nodes for REDIS_CLUSTER_NODES (all six). */
  readonly nodes: HostPort[];
  readonly servers: readonly RedisServer[];
  /** The server that is master of `key`'s slot now (the key as the server sees it). */
  masterOf(key: string): Promise<RedisServer>;
  /** SIGKILLs `server` and resolves once a replica serves its slots and the cluster is ok. */
  kill(server: RedisServer): Promise<void>;
  /** Restarts a killed node; it rejoins as a replica. Resolves once every node agrees. */
  revive(server: RedisServer): Promise<void>;
  stop(): Promise<void>;
}

const clusterNodeTimeoutMs = 1_000;

/**
 * A replica syncs at once (Redis 7 waits 5 s for more replicas before a diskless sync), and
 * takes over however long ago it last heard from its master: a test's failover must not depend on
 * the replica's data age.
 */
const replication = [
  '--repl-diskless-sync-delay',
  '0',
  '--cluster-replica-validity-factor',
  '0',
] as const;

/** Every live node says cluster_state:ok and every slot has a master nobody marks failed. */
async function clusterHealthy(servers: readonly RedisServer[]): Promise<true | undefined> {
  const live = servers.filter((s) => s.pid !== undefined);
  for (const server of live) {
    if (!(await cli(server.port, 'cluster', 'info')).includes('cluster_state:ok')) return undefined;
    const masters = parseClusterNodes(await cli(server.port, 'cluster', 'nodes')).filter(
      (n) => n.master && n.ranges.length > 0,
    );
    const covered = masters.reduce(
      (sum, n) => sum + n.ranges.reduce((s, [a, b]) => s + b - a + 1, 0),
      0,
    );
    if (covered !== 16384 || masters.some((n) => n.failed)) return undefined;
    if (masters.some((n) => !live.some((s) => s.port === n.port))) return undefined;
    const role = await cli(server.port, 'info', 'replication');
    if (role.includes('role:slave') && !role.includes('master_link_status:up')) return undefined;
  }
  return true;
}

async function startRedisCluster(): Promise<RedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'edgeai-redis-cluster-'));
  const servers: RedisServer[] = [];
  const stopAll = async () => {
    await Promise.all(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 6; i++) {
      servers.push(
        await startRedisServer({
          args: [
            '--dir',
            dir,
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${i}.conf`,
            '--cluster-node-timeout',
            String(clusterNodeTimeoutMs),
            ...replication,
          ],
        }),
      );
    }
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...servers.map((s) => `127.0.0.1:${s.port}`),
        '--cluster-replicas',
        '1',
        '--cluster-yes',
      ],
      { timeout: 30_000 },
    );
    await until('the new cluster to be ok', () => clusterHealthy(servers));
  } catch (err) {
    await stopAll();
    throw err;
  }
  const nodes = (): Promise<ClusterNodeLine[]> => {
    const live = servers.find((s) => s.pid !== undefined);
    if (live === undefined) throw new Error('redis cluster: no node is running');
    return cli(live.port, 'cluster', 'nodes').then(parseClusterNodes);
  };
  return {
    nodes: servers.map((s) => ({ host: '127.0.0.1', port: s.port })),
    servers,
    async masterOf(key) {
      const live = servers.find((s) => s.pid !== undefined)!;
      const slot = Number(await cli(live.port, 'cluster', 'keyslot', key));
      const owner = (await nodes()).find(
        (n) => n.master && !n.failed && n.ranges.some(([a, b]) => slot >= a && slot <= b),
      );
      const server = servers.find((s) => s.port === owner?.port);
      if (server === undefined) throw new Error(`redis cluster: no master for slot ${slot}`);
      return server;
    },
    async kill(server) {
      await server.stop();
      await until('a replica to take over', () => clusterHealthy(servers));
    },
    async revive(server) {
      await server.start();
      await until('the node to rejoin', async () => {
        const line = (await nodes()).find((n) => n.port === server.port);
        return line !== undefined && !line.failed ? true : undefined;
      });
      // Back from its own nodes.conf, it calls itself master until the cluster tells it that
      // its slots moved; a client refreshing its slots from it then would learn a stale map.
      await until('the node to know it is a replica now', async () => {
        const own = await cli(server.port, 'cluster', 'nodes');
        return own.split('\n').some((l) => l.includes('myself,slave')) ? true : undefined;
      });
      await until('the cluster to be ok', () => clusterHealthy(servers));
    },
    stop: stopAll,
  };
}

interface RedisSentinel {
  /** For REDIS_SENTINELS. */
  readonly sentinels: HostPort[];
  /** For REDIS_SENTINEL_NAME. */
  readonly name: string;
  /** The data servers (master and replica, in either role). */
  readonly servers: readonly RedisServer[];
  /** The server the sentinels name as master now. */
  master(): Promise<RedisServer>;
  /**
   * SIGKILLs the master; resolves with the promoted one once the sentinels name it, it takes
   * writes, and the killed one is back as its replica (as a restarted machine would be).
   */
  failover(): Promise<RedisServer>;
  stop(): Promise<void>;
}

/** INFO replication of `port` says its link to its master is up. */
async function replicaSynced(port: number): Promise<true | undefined> {
  return (await cli(port, 'info', 'replication')).includes('master_link_status:up')
    ? true
    : undefined;
}

/** A master and its replica, in one directory, the replica synced. */
async function startPair(dir: string, started: RedisServer[]): Promise<RedisServer[]> {
  const sync = ['--repl-diskless-sync-delay', '0'];
  const first = await startRedisServer({ args: ['--dir', dir, '--dbfilename', 'a.rdb', ...sync] });
  started.push(first);
  const second = await startRedisServer({
    args: [
      ...['--dir', dir, '--dbfilename', 'b.rdb', ...sync],
      ...['--replicaof', '127.0.0.1', String(first.port)],
    ],
  });
  started.push(second);
  await until('the replica to sync', () => replicaSynced(second.port));
  return [first, second];
}

/** Three sentinels watching `master`, ready once each knows the replica and the two others. */
async function startSentinels(
  dir: string,
  name: string,
  [master, replica]: RedisServer[],
  started: RedisServer[],
): Promise<RedisServer[]> {
  const sentinels: RedisServer[] = [];
  for (let i = 0; i < 3; i++) {
    const file = join(dir, `sentinel-${i}.conf`);
    const conf = [
      `sentinel monitor ${name} 127.0.0.1 ${master!.port} 2`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
    ];
    writeFileSync(file, `${conf.join('\n')}\n`);
    const sentinel = await startRedisServer({ configFile: file, args: ['--sentinel'] });
    started.push(sentinel);
    sentinels.push(sentinel);
  }
  await until('the sentinels to see each other and the replica', async () => {
    for (const s of sentinels) {
      const replicas = await cli(s.port, 'sentinel', 'replicas', name);
      const peers = await cli(s.port, 'sentinel', 'sentinels', name);
      if (!replicas.includes(String(replica!.port))) return undefined;
      if (peers.split('\n').filter((l) => l === 'name').length < 2) return undefined;
    }
    return true;
  });
  return sentinels;
}

async function startRedisSentinel(name = 'edgeai'): Promise<RedisSentinel> {
  const dir = mkdtempSync(join(tmpdir(), 'edgeai-redis-sentinel-'));
  const started: RedisServer[] = [];
  const stopAll = async () => {
    await Promise.all(started.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  };
  let data: RedisServer[];
  let sentinels: RedisServer[];
  try {
    data = await startPair(dir, started);
    sentinels = await startSentinels(dir, name, data, started);
  } catch (err) {
    await stopAll();
    throw err;
  }
  const master = async () => {
    const reply = await cli(sentinels[0]!.port, 'sentinel', 'get-master-addr-by-name', name);
    const port = Number(reply.split('\n')[1]);
    const server = data.find((s) => s.port === port);
    if (server === undefined) throw new Error(`redis sentinel: master ${port} is not ours`);
    return server;
  };
  return {
    sentinels: sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
    name,
    servers: data,
    master,
    async failover() {
      const old = await master();
      await old.stop();
      const promoted = await until(
        'the sentinels to promote the replica',
        async () => {
          const now = await master();
          if (now === old) return undefined;
          return (await cli(now.port, 'role')).startsWith('master') ? now : undefined;
        },
        60_000,
      );
      await old.start();
      await until('the old master to rejoin as a replica', () => replicaSynced(old.port), 60_000);
      return promoted;
    },
    stop: stopAll,
  };
}

export { startRedisCluster, startRedisSentinel };
export type { RedisCluster, RedisSentinel, HostPort };
