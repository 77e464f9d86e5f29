/**
 * The edge workers' Redis user, exactly as knative/redis/statefulset.yaml defines it, on a real
 * redis-server: the worker's own code (task reload, offload budget, shared event answers) works
 * through it, and what a worker in a user's namespace must not do is refused (aset-scheduler's
 * shared state included). The same for the mlgraph user of an MLGraph's Services: the route,
 * join and path stores work through it, and nothing else does. And for federated learning: the
 * fl-aggregator user runs a job's whole round store and is granted exactly the commands that
 * takes, and reconcile-tick's user reads the jobs' progress and can write nothing.
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
import { readProgress } from '../../shared/fl/progress.js';
import { createRoundStore } from '../../shared/fl/round-store.js';
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
import { createRedis, redisReadiness, waitReady } from '../../shared/redis/index.js';
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
  /** The (first) ACL user under test. */
  user: RedisClient;
  client(username: string | undefined, password: string | undefined): RedisClient;
  /** A new connection as a manifest user of this server (disconnected after the block). */
  login(username: string): RedisClient;
}

/**
 * A redis-server with ACL user `name` (and `more` users) exactly as the manifest defines them,
 * for the tests of the calling describe block (started before them, stopped after).
 */
function aclRedis(
  name: string,
  variable: string,
  ...more: ReadonlyArray<readonly [name: string, variable: string]>
): AclRedis {
  const adminPassword = randomBytes(16).toString('hex');
  const users = [[name, variable] as const, ...more].map(([user, from]) => ({
    user,
    from,
    password: randomBytes(16).toString('hex'),
  }));
  const opened: RedisClient[] = [];
  const redis = {
    client: (username: string | undefined, secret: string | undefined) => {
      const client = createRedis(
        {
          url: redis.server.url,
          username,
          password: secret,
          keyPrefix: 'edgeai:',
          commandTimeoutMs: 2000,
          connectTimeoutMs: 2000,
        },
        () => {},
      );
      opened.push(client);
      return client;
    },
    login: (username: string) =>
      redis.client(username, users.find((u) => u.user === username)?.password),
  } as AclRedis;
  beforeAll(async () => {
    redis.server = await startRedisServer({
      password: adminPassword,
      args: users.flatMap((u) => userArgs(u.user, u.from, u.password)),
    });
    redis.admin = redis.client(undefined, adminPassword);
    redis.user = redis.login(name);
    await Promise.all([waitReady(redis.admin, 10_000), waitReady(redis.user, 10_000)]);
  });
  afterAll(async () => {
    for (const client of opened) client.disconnect();
    await redis.server?.stop();
  });
  return redis;
}

/** The commands a user's rules grant (`+name`), as Redis names them (lower case). */
function granted(name: string): string[] {
  return userArgs(name, '', '')
    .filter((rule) => rule.startsWith('+'))
    .map((rule) => rule.slice(1).toLowerCase())
    .sort();
}

/**
 * The commands Redis runs while `work` does (MONITOR, on a connection of the default user),
 * those of Lua scripts included, by name; AUTH is not one (every user may run it).
 */
async function commandsRun(r: AclRedis, work: () => Promise<void>): Promise<string[]> {
  const admin = r.admin;
  if (!('monitor' in admin)) throw new Error('MONITOR needs a single Redis, not a cluster');
  const monitor = await admin.monitor();
  const seen = new Set<string>();
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (args[0] !== undefined) seen.add(args[0].toLowerCase());
  });
  try {
    await work();
    // MONITOR feeds the monitor asynchronously: a marker the monitor sees ends the window.
    const marker = `end-${randomBytes(4).toString('hex')}`;
    const ended = new Promise<void>((resolve) =>
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[1] === marker) resolve();
      }),
    );
    await r.admin.echo(marker);
    await ended;
  } finally {
    monitor.disconnect();
  }
  seen.delete('echo');
  seen.delete('auth');
  return [...seen].sort();
}

/** Every promise rejected by Redis's ACL (as a command, or inside a script). */
async function expectRefused(attempts: ReadonlyArray<Promise<unknown>>): Promise<void> {
  for (const result of await Promise.allSettled(attempts)) {
    expect(result.status).toBe('rejected');
    expect(String((result as PromiseRejectedResult).reason)).toMatch(
      /NOPERM|user executing the script can't run this command/,
    );
  }
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

describe('the fl-aggregator and reconcile-tick Redis users of knative/redis', () => {
  const r = aclRedis('fl-aggregator', 'REDIS_FL_AGGREGATOR_PASSWORD', [
    'reconcile-tick',
    'REDIS_RECONCILE_TICK_PASSWORD',
  ]);
  const job = 'team-a/digits/6f1c2a9e-0b7d-4c3e-9a51-2d8e4f60b7c1';
  const keyOf = (part: string) => `fl:{fl:${job}}:${part}`;
  const t0 = 1_000_000;
  const summary = (round: number, version: number) =>
    JSON.stringify({
      round,
      version,
      participants: 2,
      stragglers: [],
      closedBy: 'quorum',
      durationMs: 1000,
    });

  it("runs a job's whole round store as fl-aggregator, with exactly the commands it is granted", async () => {
    // As a restarted or failed-over Redis would: the first script call finds no script (EVAL).
    await r.admin.script('FLUSH');
    let history: string[] = [];
    const used = await commandsRun(r, async () => {
      const redis = r.login('fl-aggregator');
      await waitReady(redis, 10_000); // the client's ready check: INFO
      await redisReadiness(redis).check(); // the function's readiness: PING
      const store = createRoundStore(redis, job);
      const first = { selected: ['edge0', 'edge1'], quorum: 2, nowMs: t0, deadlineMs: t0 + 60_000 };
      expect((await store.open({ ...first, sha: 'v0' })).created).toBe(true);
      expect((await store.open({ ...first, sha: 'v0' })).created).toBe(false);
      await store.saveModel(0, new Uint8Array([0, 1, 2]));
      const offer = (worker: string, round: number, base: number, nowMs: number) =>
        store.offer({ round, worker, base, meta: '{}', weights: Buffer.alloc(8, 1), nowMs });
      expect((await offer('edge0', 1, 0, t0 + 1)).kind).toBe('accepted');
      expect((await offer('edge0', 1, 0, t0 + 2)).kind).toBe('duplicate');
      expect(await offer('intruder', 1, 0, t0 + 3)).toMatchObject({ reason: 'not-selected' });
      expect((await store.claim(1, 'a', t0 + 4, 1000)).kind).toBe('waiting');
      expect((await offer('edge1', 1, 0, t0 + 5)).kind).toBe('accepted');
      expect(await store.submitted()).toEqual(['edge0', 'edge1']);
      expect((await store.updates()).map((u) => u.worker)).toEqual(['edge0', 'edge1']);
      expect(await store.claim(1, 'a', t0 + 6, 1000)).toMatchObject({ kind: 'claimed' });
      // The first claimer died: its lease runs out and another aggregator takes the round over.
      expect(await store.claim(1, 'b', t0 + 2000, 1000)).toMatchObject({ kind: 'claimed' });
      await store.saveModel(1, new Uint8Array([3, 4, 5]));
      const next = { selected: first.selected, quorum: 2, nowMs: t0 + 2001 };
      const committed = await store.commit({
        round: 1,
        token: 'b',
        outcome: 'next',
        version: 1,
        sha: 'v1',
        summary: summary(1, 1),
        ...next,
        deadlineMs: t0 + 3000,
      });
      expect(committed).toBe(true);
      expect(await store.model(1)).toEqual(Buffer.from([3, 4, 5]));
      await store.dropModel(0);
      // Round 2: no update by its deadline, so it opens again; a trainer reports a failure.
      expect(await store.claim(2, 'c', t0 + 3000, 1000)).toMatchObject({ closedBy: 'deadline' });
      const retry = { round: 2, token: 'c', outcome: 'retry' as const, ...next };
      expect(await store.commit({ ...retry, deadlineMs: t0 + 4000 })).toBe(true);
      await store.recordFailure('edge1', {
        atMs: t0 + 3001,
        round: 2,
        exitCode: 1,
        message: 'out of memory',
      });
      expect((await offer('edge0', 2, 1, t0 + 3002)).kind).toBe('accepted');
      expect(await store.claim(2, 'd', t0 + 4000, 1000)).toMatchObject({ kind: 'claimed' });
      await store.saveModel(2, new Uint8Array([6]));
      const done = await store.commit({
        round: 2,
        token: 'd',
        outcome: 'done',
        version: 2,
        sha: 'v2',
        summary: summary(2, 2),
        nowMs: t0 + 4001,
        message: 'maxRounds reached',
      });
      expect(done).toBe(true);
      expect((await store.state())?.status).toBe('done');
      expect((await store.workers()).get('edge1')?.failure?.exitCode).toBe(1);
      history = await store.history();
    });
    expect(history.map((h) => (JSON.parse(h) as { round: number }).round)).toEqual([2, 1]);
    expect(await r.admin.exists(keyOf('model:0'))).toBe(0);
    // Every command granted is one the store runs (the client's INFO and the probe's PING
    // included), and it runs no other.
    expect(used).toEqual(granted('fl-aggregator'));
  });

  it("refuses the aggregator everything else: other domains' keys, other commands, admin", async () => {
    const state = keyOf('state');
    await expectRefused([
      r.user.hget('tasks:{edge0}:current', 'default/x'),
      r.user.set('status:{default/x}:totals', '1'),
      r.user.get('budget:{default/x}:cut'),
      r.user.lrange('quality:{default/x}:buckets', 0, -1),
      r.user.hgetall('mlgraph:{ns.g-pick}:arms'),
      r.user.hgetall('aset:{aset:full-edge}:bindings'),
      r.user.set('seen:{x}:y', '1'),
      r.user.eval("return redis.call('SET', KEYS[1], '1')", 1, 'tasks:{edge0}:current'),
      // Its own keys, with commands the store does not run.
      r.user.eval("return redis.call('EXPIRE', KEYS[1], 1)", 1, state),
      r.user.expire(state, 1),
      r.user.xadd(keyOf('stream'), '*', 'a', 'b'),
      r.user.publish('fl', 'x'),
      r.user.keys('*'),
      r.user.scan(0),
      r.user.flushall(),
      r.user.call('CONFIG', 'GET', 'requirepass'),
      r.user.call('ACL', 'LIST'),
    ]);
    expect(await r.admin.exists('tasks:{edge0}:current')).toBe(0);
  });

  it("lets reconcile-tick read a job's progress, with exactly the commands it is granted", async () => {
    // The job the test above ran (its rounds, history and worker records).
    expect(await r.admin.hget(keyOf('state'), 'status')).toBe('done');
    let progress: Awaited<ReturnType<typeof readProgress>>;
    const used = await commandsRun(r, async () => {
      const tick = r.login('reconcile-tick');
      await waitReady(tick, 10_000);
      await redisReadiness(tick).check();
      progress = await readProgress(tick, job);
    });
    expect(progress!).toMatchObject({ status: 'done', version: 2, sha: 'v2' });
    expect(progress!.message).toBe('maxRounds reached');
    expect(progress!.history.map((h) => h.round)).toEqual([2, 1]);
    expect(progress!.workers.get('edge1')?.failure?.message).toBe('out of memory');
    expect(progress!.workers.get('edge0')?.accepted).toBe(2);
    expect(used).toEqual(granted('reconcile-tick'));
  });

  it("refuses every write as reconcile-tick, and every key but the jobs' progress", async () => {
    const tick = r.login('reconcile-tick');
    await waitReady(tick, 10_000);
    const state = keyOf('state');
    const store = createRoundStore(tick, job);
    await expectRefused([
      tick.hset(state, 'status', 'open'),
      tick.del(state),
      tick.unlink(keyOf('model:2')),
      tick.set(keyOf('model:9'), 'x'),
      tick.lpush(keyOf('history'), '{}'),
      tick.eval("return redis.call('HSET', KEYS[1], 'status', 'open')", 1, state),
      // The round store's own writes, as an aggregator would run them.
      store.recordFailure('edge0', { atMs: 1, round: 1, exitCode: 1, message: 'x' }),
      store.claim(2, 'e', t0 + 9000, 1000),
      store.saveModel(3, new Uint8Array([1])),
      // Reads of anything else.
      tick.hgetall('tasks:{edge0}:current'),
      tick.lrange('quality:{default/x}:buckets', 0, -1),
      tick.hgetall('mlgraph:{ns.g-pick}:arms'),
      tick.get(keyOf('model:2')),
      tick.keys('*'),
      tick.flushall(),
      tick.call('CONFIG', 'GET', 'requirepass'),
    ]);
    expect(await r.admin.hgetall(state)).toMatchObject({ status: 'done', version: '2' });
    expect(await r.admin.exists(keyOf('model:2'), keyOf('model:3'), keyOf('model:9'))).toBe(1);
  });

  it('keeps its keys read-only even for a write command granted by mistake', async () => {
    // %R~ is a second guard: the same rules plus HSET and DEL still write nothing.
    const rules = userArgs('reconcile-tick', 'REDIS_RECONCILE_TICK_PASSWORD', 'pw')
      .slice(2)
      .filter((rule) => rule !== 'on' && !rule.startsWith('>'));
    await r.admin.call(
      'ACL',
      'SETUSER',
      'tick-with-writes',
      'on',
      '>pw',
      ...rules,
      '+hset',
      '+del',
    );
    const widened = r.client('tick-with-writes', 'pw');
    await waitReady(widened, 10_000);
    expect(await widened.hgetall(keyOf('state'))).toMatchObject({ status: 'done' });
    await expectRefused([
      widened.hset(keyOf('state'), 'status', 'open'),
      widened.del(keyOf('state')),
    ]);
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
