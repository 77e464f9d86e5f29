/**
 * The edge workers' Redis user, exactly as knative/redis/statefulset.yaml defines it, on a real
 * redis-server: the worker's own code (task reload, offload budget, shared event answers) works
 * through it, and what a worker in a user's namespace must not do is refused (aset-scheduler's
 * shared state included). The same for the mlgraph user of an MLGraph's Services: the route,
 * join and path stores work through it, and nothing else does.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createBindingStore } from '../../shared/aset/index.js';
import {
  createJoinStore,
  createPathStore,
  createRouteStore,
  createRouter,
} from '../../shared/mlgraph/index.js';
import { createQualityWindow } from '../../shared/inference/quality-window.js';
import {
  createBudget,
  createMiner,
  sharedAnswers,
  watchTask,
} from '../../shared/inference/index.js';
import { startRedisServer } from '../../local/redis-server.js';
import type { RedisServer } from '../../local/redis-server.js';
import { startRedisCluster } from '../../local/redis-topologies.js';
import type { RedisCluster } from '../../local/redis-topologies.js';
import { createRedis, waitReady } from '../../shared/redis/index.js';
import type { RedisClient } from '../../shared/redis/index.js';
import { createTaskStreams } from '../../shared/sync/index.js';
import { capturedTelemetry } from '../support/http.js';
import { helmetDetectionTask } from '../support/samples.js';

interface Container {
  args: string[];
}

/** The `--user <name>` directive of the Redis container, with its password filled in. */
function userArgs(name: string, variable: string, password: string): string[] {
  const deployment = parse(
    readFileSync(new URL('../../knative/redis/statefulset.yaml', import.meta.url), 'utf8'),
  ) as { spec: { template: { spec: { containers: Container[] } } } };
  const args = deployment.spec.template.spec.containers[0]!.args;
  const from = args.findIndex((a, i) => a === '--user' && args[i + 1] === name);
  expect(from, `the Redis container defines ACL user ${name}`).toBeGreaterThan(-1);
  const next = args.findIndex((a, i) => i > from && a.startsWith('--'));
  const directive = args.slice(from, next === -1 ? undefined : next);
  // The kubelet expands $(VAR) from the container's env.
  return directive.map((a) => a.replace(`$(${variable})`, password));
}

interface AclRedis {
  server: RedisServer;
  /** The default user, as the control plane's functions log in. */
  admin: RedisClient;
  /** The ACL user under test. */
  user: RedisClient;
  client(username: string | undefined, password: string | undefined): RedisClient;
}

/**
 * A redis-server with ACL user `name` exactly as the manifest defines it, for the tests of the
 * calling describe block (started before them, stopped after).
 */
function aclRedis(name: string, variable: string): AclRedis {
  const adminPassword = randomBytes(16).toString('hex');
  const password = randomBytes(16).toString('hex');
  const redis = {
    client: (username: string | undefined, secret: string | undefined) =>
      createRedis(
        {
          url: redis.server.url,
          username,
          password: secret,
          keyPrefix: 'edgeai:',
          commandTimeoutMs: 2000,
          connectTimeoutMs: 2000,
        },
        () => {},
      ),
  } as AclRedis;
  beforeAll(async () => {
    redis.server = await startRedisServer({
      password: adminPassword,
      args: userArgs(name, variable, password),
    });
    redis.admin = redis.client(undefined, adminPassword);
    redis.user = redis.client(name, password);
    await Promise.all([waitReady(redis.admin, 10_000), waitReady(redis.user, 10_000)]);
  });
  afterAll(async () => {
    redis.admin?.disconnect();
    redis.user?.disconnect();
    await redis.server?.stop();
  });
  return redis;
}

describe('the edge-worker Redis user of knative/redis', () => {
  const r = aclRedis('edge-worker', 'REDIS_WORKER_PASSWORD');

  it("runs the worker's own code: task reload, offload budget, shared event answers", async () => {
    await createTaskStreams(r.admin, { maxLength: 100 }).offer(
      'edge0',
      helmetDetectionTask(3, { name: 'Margin', parameters: { margin: 0.3 } }),
    );
    const { log } = capturedTelemetry('edge-infer');
    const target = { miner: createMiner('Threshold', { threshold: 0.9 }) };
    const watcher = watchTask({
      redis: r.user,
      node: 'edge0',
      service: 'default/helmet-detection-demo',
      target,
      pollMs: 60_000,
      log,
    });
    await watcher.poll();
    watcher.stop();
    expect(target.miner.name).toBe('Margin');

    const budget = createBudget({
      redis: r.user,
      service: 'default/helmet-detection-demo',
      target: 0.1,
      window: 100,
      refreshMs: 0,
      log,
    });
    for (let i = 0; i < 100; i += 1) budget.observe(i / 100);
    await budget.refresh();
    expect(budget.cut()).toBeCloseTo(0.89, 6);

    const warnings: string[] = [];
    const answers = sharedAnswers(r.user, {
      scope: 'default/helmet-detection-demo',
      leaseSeconds: 1,
      keepSeconds: 60,
      warn: (fields, message) => warnings.push(`${message}: ${String(fields['err'])}`),
    });
    let computed = 0;
    let renewed = false;
    // Answers once the claim was renewed (its TTL went back up) under the ACL, or the renewal
    // was refused (a warning), or the claim lapsed: polling Redis, not a fixed wait.
    const claim = 'answer:{default/helmet-detection-demo}:2:/c:e1';
    const answer = async () => {
      let before = await r.admin.pttl(claim);
      while (!renewed && warnings.length === 0 && before > 0) {
        await new Promise((r) => setTimeout(r, 50));
        const now = await r.admin.pttl(claim);
        renewed = now > before;
        before = now;
      }
      return { outputs: [++computed] };
    };
    expect(await answers('2:/c:e1', answer)).toEqual({ outputs: [1] });
    expect(await answers('2:/c:e1', answer)).toEqual({ outputs: [1] });
    await expect(answers('2:/c:e2', () => Promise.reject(new Error('bad input')))).rejects.toThrow(
      'bad input',
    );
    expect(await r.admin.exists('answer:{default/helmet-detection-demo}:2:/c:e2')).toBe(0);
    expect(warnings).toEqual([]);
    expect(renewed).toBe(true);

    // The quality window: adds exactly once per delivery, and flips the drift state.
    const quality = createQualityWindow({
      redis: r.user,
      service: 'default/helmet-detection-demo',
      reporter: 'edge0-1',
      bucketSize: 50,
      buckets: 4,
      driftWindow: 100,
      refreshMs: 0,
      calibration: { objective: 0.01, z: 1, minLabelled: 10 },
      drift: { expectedShare: 0.05, raiseAt: 5, clearAt: 2, minInputs: 20 },
      log,
    });
    for (let i = 0; i < 60; i += 1) {
      quality.observe(0, true);
      quality.label(0, 0);
    }
    await quality.refresh();
    await quality.refresh();
    expect(quality.state().drift?.drifting).toBe(true);
    expect(await r.admin.llen('quality:{default/helmet-detection-demo}:buckets')).toBeGreaterThan(
      0,
    );
  });

  it('refuses what a worker must not do: task and status writes, other keys, admin commands', async () => {
    const refused = [
      r.user.hset('tasks:{edge0}:current', 'default/x', '{}'),
      r.user.xadd('tasks:{edge0}:stream', '*', 'operation', 'insert'),
      r.user.hget('tasks:{edge0}:versions', 'default/x'),
      r.user.set('status:{default/x}:totals', '1'),
      r.user.set('dedupe:{x}:y', '1'),
      r.user.eval("return redis.call('SET', KEYS[1], '1')", 1, 'status:{x}:totals'),
      r.user.keys('*'),
      r.user.flushall(),
      r.user.call('CONFIG', 'GET', 'requirepass'),
      r.user.call('ACL', 'LIST'),
    ];
    for (const result of await Promise.allSettled(refused)) {
      expect(result.status).toBe('rejected');
      expect(String((result as PromiseRejectedResult).reason)).toMatch(/NOPERM/);
    }
  });

  it("keeps aset-scheduler's state, which it reaches as the default user, out of a worker's reach", async () => {
    // aset-scheduler connects as the control-plane functions do: the default user's password.
    const store = createBindingStore(r.admin, {
      topology: 'full-edge',
      workers: 2,
      tombstoneMs: 60_000,
      dedupeSeconds: 60,
    });
    expect(await store.window(1_000_000, 25_000)).toEqual({ kind: 'started', startMs: 1_000_000 });
    expect(
      await store.addResponses({ source: '/agent', id: 'r1' }, [{ worker: 0, responses: 5 }]),
    ).toBe(true);
    expect(await r.admin.exists('aset:{aset:full-edge}:window')).toBe(1);
    const refused = [
      r.user.hgetall('aset:{aset:full-edge}:bindings'),
      r.user.hset('aset:{aset:full-edge}:workers', '0:v0', '0'),
      r.user.get('aset:{aset:full-edge}:window'),
      r.user.del('aset:{aset:full-edge}:window'),
      r.user.eval("return redis.call('DEL', KEYS[1])", 1, 'aset:{aset:full-edge}:ended'),
      r.user.set('seen:{aset:full-edge}:6:/agent:r2', '1'),
    ];
    for (const result of await Promise.allSettled(refused)) {
      expect(result.status).toBe('rejected');
      expect(String((result as PromiseRejectedResult).reason)).toMatch(/NOPERM/);
    }
  });

  it('lets no one in without a password', async () => {
    const anonymous = createRedis(
      {
        url: r.server.url,
        keyPrefix: 'edgeai:',
        commandTimeoutMs: 2000,
        connectTimeoutMs: 2000,
      },
      () => {},
    );
    try {
      await expect(waitReady(anonymous, 1000)).rejects.toThrow();
    } finally {
      anonymous.disconnect();
    }
  });
});

describe('the mlgraph Redis user of knative/redis', () => {
  const r = aclRedis('mlgraph', 'REDIS_MLGRAPH_PASSWORD');

  it("runs a graph's own code: routes and rewards, joins, prediction paths", async () => {
    const router = createRouter({
      strategy: { kind: 'thompson' },
      children: ['a', 'b'],
      store: createRouteStore(r.user, { node: 'ns.g-pick', puidTtlMs: 60_000 }),
      uniform: Math.random,
      normal: () => 0,
    });
    const { route } = await router.predict({ puid: 'p1', body: undefined });
    expect(route).toHaveLength(1);
    expect(await router.reward('p1', 1)).toBe('applied');
    expect((await router.arms()).children.reduce((n, c) => n + c.rewarded, 0)).toBe(1);

    const joins = createJoinStore(r.user, {
      node: 'ns.g-both',
      deadlineMs: 1_000,
      keepMs: 60_000,
      leaseMs: 500,
    });
    await joins.add({ puid: 'p1', source: 'a', pending: 1, payload: { y: 1 }, nowMs: 0 });
    expect((await joins.tighten({ puid: 'p1', inputs: 1 })).kind).toBe('complete');
    await joins.add({ puid: 'p2', source: 'a', pending: 1, payload: { y: 1 }, nowMs: 0 });
    const { claimed } = await joins.due(5_000, 10);
    expect(claimed.map((c) => c.puid)).toEqual(['p2']);
    expect(await joins.finish('p2', claimed[0]!.claim)).toBe(true);
    expect((await joins.get('p2'))?.state).toBe('partial');

    const paths = createPathStore(r.user, { graph: 'ns/g', ttlMs: 60_000 });
    await paths.record('p1', ['mine']);
    expect(await paths.routers('p1')).toEqual(['mine']);
  });

  it("refuses everything else: the control plane's and the workers' keys, admin commands", async () => {
    // Refused as a command (NOPERM), or inside a script (Redis 7 words that one differently).
    const refused = [
      r.user.hget('tasks:{edge0}:current', 'default/x'),
      r.user.set('status:{default/x}:totals', '1'),
      r.user.get('budget:{default/x}:cut'),
      r.user.hgetall('aset:{aset:full-edge}:bindings'),
      r.user.eval("return redis.call('SET', KEYS[1], '1')", 1, 'mlgraph:{x}:y'),
      r.user.keys('*'),
      r.user.flushall(),
      r.user.call('CONFIG', 'GET', 'requirepass'),
    ];
    for (const result of await Promise.allSettled(refused)) {
      expect(result.status).toBe('rejected');
      expect(String((result as PromiseRejectedResult).reason)).toMatch(
        /NOPERM|user executing the script can't run this command/,
      );
    }
  });
});

describe('the mlgraph Redis user on a Redis Cluster, with the additions docs/deploying.md names', () => {
  // docs/deploying.md step 4: on a cluster the users also need the slot map, and WAIT with
  // waitReplicas; without either, the client never gets ready or every write is refused.
  const additions = ['+cluster|slots', '+cluster|info', '+wait'];
  const password = randomBytes(16).toString('hex');
  let cluster: RedisCluster;
  const clients: RedisClient[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await cluster?.stop();
  });

  /** Defines the manifest's mlgraph user (plus `extra` rules) on every node, and logs in. */
  async function mlgraphUser(extra: readonly string[]): Promise<RedisClient> {
    const [, name, ...rules] = userArgs('mlgraph', 'REDIS_MLGRAPH_PASSWORD', password);
    for (const node of cluster.nodes) {
      await (await admin(node.port)).call('ACL', 'SETUSER', name!, 'reset', ...rules, ...extra);
    }
    const client = createRedis(
      {
        clusterNodes: cluster.nodes,
        username: 'mlgraph',
        password,
        keyPrefix: 'edgeai:',
        commandTimeoutMs: 2000,
        connectTimeoutMs: 2000,
        waitReplicas: 1,
        waitTimeoutMs: 1000,
      },
      () => {},
    );
    clients.push(client);
    return client;
  }
  const admins = new Map<number, RedisClient>();
  async function admin(port: number): Promise<RedisClient> {
    if (!admins.has(port)) {
      const client = createRedis(
        {
          url: `redis://127.0.0.1:${port}`,
          keyPrefix: '',
          commandTimeoutMs: 2000,
          connectTimeoutMs: 2000,
        },
        () => {},
      );
      admins.set(port, client);
      clients.push(client);
      await waitReady(client, 10_000);
    }
    return admins.get(port)!;
  }

  it('rewards through the route store with them, and cannot get ready without them', async () => {
    const bare = await mlgraphUser([]);
    await expect(waitReady(bare, 3_000)).rejects.toThrow(/not ready/);
    const user = await mlgraphUser(additions);
    await waitReady(user, 10_000);
    const routes = createRouteStore(user, { node: 'ns.g-r', puidTtlMs: 60_000 });
    await routes.record('p1', ['small']);
    expect(await routes.reward('p1', 1)).toBe('applied');
    expect((await routes.stats(['small'])).get('small')).toMatchObject({ routed: 1, rewarded: 1 });
  });
});
