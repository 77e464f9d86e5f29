/**
 * The node-token cache against the development API server: node names come from unauthenticated
 * requests, so what a stream of invented names may cost (reads and memory) is bounded.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { UnavailableError } from '../../../shared/errors/index.js';
import type { Kube } from '../../../shared/k8s/index.js';
import { secretTokens } from '../../../shared/status/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';

const namespace = 'edgeai-system';
const token = 'edge0-token-0123456789';

describe('secretTokens', () => {
  let api: TestApiServer;
  const reads = () => api.calls.get('get secret') ?? 0;

  beforeAll(async () => {
    api = await startApiServer();
    await api.kube.create('secret', namespace, {
      metadata: { name: 'edgeai-node-edge0' },
      data: { token: Buffer.from(token).toString('base64') },
    });
  });
  afterAll(() => api.close());
  beforeEach(() => api.resetCalls());

  it('shares one Secret read among concurrent lookups of a node', async () => {
    const tokens = secretTokens(api.kube, namespace, 30_000);
    const found = await Promise.all(
      Array.from({ length: 20 }, (_, i) => tokens.token(i % 2 === 0 ? 'edge0' : 'nobody')),
    );
    expect(reads()).toBe(2);
    expect(found.filter((t) => t?.toString() === token)).toHaveLength(10);
    expect(found.filter((t) => t === undefined)).toHaveLength(10);
  });

  it('keeps at most maxEntries nodes, evicting the least recently used', async () => {
    const tokens = secretTokens(api.kube, namespace, 60_000, { maxEntries: 3 });
    for (const node of ['a', 'b', 'c']) await tokens.token(node);
    expect(reads()).toBe(3);
    await tokens.token('a');
    expect(reads()).toBe(3);
    // 'b' is now the least recently used: 'd' takes its place.
    await tokens.token('d');
    expect(reads()).toBe(4);
    for (const node of ['a', 'c', 'd']) await tokens.token(node);
    expect(reads()).toBe(4);
    await tokens.token('b');
    expect(reads()).toBe(5);
  });

  it('a flood of invented node names keeps costing reads, never unbounded entries', async () => {
    const tokens = secretTokens(api.kube, namespace, 60_000, { maxEntries: 50 });
    await tokens.token('edge0');
    for (let i = 0; i < 200; i += 1) await tokens.token(`random-${i}`);
    api.resetCalls();
    // Had every name been kept, none of these would read again.
    for (let i = 0; i < 200; i += 1) await tokens.token(`random-${i}`);
    expect(reads()).toBe(200);
    expect((await tokens.token('edge0'))?.toString()).toBe(token);
  });

  it('keeps an entry for the TTL, absent tokens included; TTL 0 caches nothing', async () => {
    let clock = 1_000;
    const tokens = secretTokens(api.kube, namespace, 100, { now: () => clock });
    await tokens.token('edge0');
    await tokens.token('nobody');
    clock += 99;
    await tokens.token('edge0');
    await tokens.token('nobody');
    expect(reads()).toBe(2);
    clock += 1;
    await tokens.token('edge0');
    await tokens.token('nobody');
    expect(reads()).toBe(4);

    api.resetCalls();
    const uncached = secretTokens(api.kube, namespace, 0);
    await uncached.token('edge0');
    await uncached.token('edge0');
    expect(reads()).toBe(2);
  });

  it('does not cache a failed read: concurrent callers share the failure, the next one reads', async () => {
    let failures = 1;
    const flaky: Kube = {
      ...api.kube,
      get(ref) {
        if (ref.kind === 'secret' && failures > 0) {
          failures -= 1;
          return Promise.reject(new UnavailableError('API server: overloaded'));
        }
        return api.kube.get(ref);
      },
    };
    const tokens = secretTokens(flaky, namespace, 30_000);
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => tokens.token('edge0')));
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect((await tokens.token('edge0'))?.toString()).toBe(token);
    expect(reads()).toBe(1);
  });
});
