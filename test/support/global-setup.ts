/**
 * One Redis for the whole run: REDIS_URL when set (tests isolate themselves by key prefix),
 * otherwise a private redis-server stopped at the end.
 */
import type { TestProject } from 'vitest/node';
import { startRedisServer } from '../../local/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const external = process.env['REDIS_URL'];
  if (external !== undefined && external !== '') {
    project.provide('redisUrl', external);
    return async () => {};
  }
  const server = await startRedisServer();
  project.provide('redisUrl', server.url);
  return () => server.stop();
}
