/**
 * One Redis for the whole run: REDIS_URL when set (tests isolate themselves by key prefix),
 * otherwise a private redis-server stopped at the end. With EDGEAI_TEST_REDIS=cluster (`make
 * test-redis-cluster`), a private Redis Cluster of 3 masters and 3 replicas instead.
 */
import type { TestProject } from 'vitest/node';
import { startRedisServer } from '../../local/index.js';
import { startRedisCluster } from '../../local/redis-topologies.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The single Redis ('' when the run uses a cluster). */
    redisUrl: string;
    /** REDIS_CLUSTER_NODES of the run's cluster ('' when it uses one Redis). */
    redisClusterNodes: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (process.env['EDGEAI_TEST_REDIS'] === 'cluster') {
    const cluster = await startRedisCluster();
    project.provide('redisUrl', '');
    project.provide('redisClusterNodes', cluster.nodes.map((n) => `${n.host}:${n.port}`).join(','));
    return () => cluster.stop();
  }
  project.provide('redisClusterNodes', '');
  const external = process.env['REDIS_URL'];
  if (external !== undefined && external !== '') {
    project.provide('redisUrl', external);
    return async () => {};
  }
  const server = await startRedisServer();
  project.provide('redisUrl', server.url);
  return () => server.stop();
}
