/**
 * What asynchronous replication can lose, measured: 16 writers add unique ids to one set through
 * runScript, each id acknowledged to the writer, while the master is SIGKILLed. Without
 * REDIS_WAIT_REPLICAS a write the master acknowledged but had not yet sent to its replica is gone
 * after the promotion; with REDIS_WAIT_REPLICAS=1 an acknowledged write is on the replica, so
 * none may be missing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashTag, key, luaScript, runScript } from '../../shared/redis/index.js';
import { report, retrying, startFailoverRedis } from './redis-failover.js';
import type { FailoverRedis, Topology } from './redis-failover.js';

const add = luaScript(1, "return redis.call('SADD', KEYS[1], ARGV[1])");
const writers = 16;

describe.each<Topology>(['sentinel', 'cluster'])('acknowledged writes, %s failover', (topology) => {
  let redis: FailoverRedis;
  beforeAll(async () => {
    redis = await startFailoverRedis(topology);
  }, 120_000);
  afterAll(() => redis?.stop());

  it.each([0, 1])(
    'REDIS_WAIT_REPLICAS=%i',
    async (waitReplicas) => {
      const client = await redis.client(waitReplicas);
      const set = key('acked', hashTag(`loss-${waitReplicas}`));
      const acked: string[] = [];
      const counter = { unavailable: 0 };
      let failingOver = true;
      const failoversBefore = redis.failovers;
      const failover = redis.failover(set).finally(() => (failingOver = false));
      let next = 0;
      let after = 0;
      const deadline = Date.now() + 90_000;
      // Writing until the failover is over, then until 400 more are acknowledged (on the promoted
      // master, once it has a replica again).
      await Promise.all(
        Array.from({ length: writers }, async () => {
          while ((failingOver || after < 400) && Date.now() < deadline) {
            const id = String(next++);
            // Not retried: an id whose write failed is simply not acknowledged.
            const ok = await runScript(client, add, [set, id], () => true).catch(() => false);
            if (ok) {
              acked.push(id);
              if (!failingOver) after += 1;
            } else {
              counter.unavailable += 1;
              await new Promise((r) => setTimeout(r, 20));
            }
          }
        }),
      );
      await failover;
      const stored = new Set(await retrying(() => client.smembers(set), counter));
      const lost = acked.filter((id) => !stored.has(id)).length;
      report({
        scenario: `acknowledged writes, REDIS_WAIT_REPLICAS=${waitReplicas}`,
        topology,
        operations: next,
        failovers: redis.failovers - failoversBefore,
        lost,
        doubled: 0,
        unavailable: counter.unavailable,
      });
      expect(acked.length).toBeGreaterThan(100);
      if (waitReplicas > 0) expect(lost).toBe(0);
    },
    180_000,
  );
});
