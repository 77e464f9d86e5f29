/**
 * upstream-status under load, over real HTTP with a real Redis and client-node against the
 * development API server: two replicas, 2,000 reports from 50 concurrent reporters with
 * redeliveries and forced 409s, and the counters come out exact. In the integration lane (it runs
 * for seconds); upstream.test.ts has the rest of upstream-status.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../../shared/http/index.js';
import {
  createReportCounters,
  createUpstream,
  secretTokens,
  upstreamStatusDefinition,
} from '../../../shared/status/index.js';
import { seededRandom } from '../../../shared/random/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { conflicting } from '../../support/kube-faults.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionSample } from '../../support/samples.js';

const ns = 'default';
const name = 'helmet-detection-demo';
const statusPath = `/${ns}/jointinferenceservices/${name}/status`;
const token = 'edge0-token-0123456789';

describe('upstream-status replicas under concurrent reports', () => {
  let api: TestApiServer;
  let redis: TestRedis;
  const replicas: Array<Listening & { kube: ReturnType<typeof conflicting> }> = [];

  const post = (replica: number, body: unknown) =>
    fetch(`${replicas[replica]!.url}${statusPath}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-edgeai-node': 'edge0',
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify(body),
    });
  const service = () => api.kube.get({ kind: 'jointInferenceService', namespace: ns, name });

  beforeAll(async () => {
    api = await startApiServer();
    redis = await testRedis();
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    await api.kube.create('node', undefined, { metadata: { name: 'edge0' } });
    await api.kube.create('secret', 'edgeai-system', {
      metadata: { name: 'edgeai-node-edge0' },
      data: { token: Buffer.from(token).toString('base64') },
    });
    await api.kube.create('jointInferenceService', ns, helmetDetectionSample());
    for (let i = 0; i < 2; i += 1) {
      const kube = conflicting(api.kube, 4);
      const definition = upstreamStatusDefinition({
        upstream: createUpstream({ kube, counters, attempts: 20 }),
        tokens: secretTokens(api.kube, 'edgeai-system', 30_000),
        maxReportAgeMs: 600_000,
        readiness: [],
      });
      const server = buildServer(definition, {
        telemetry: capturedTelemetry('upstream-status'),
        bodyLimitBytes: 4096,
        readinessTimeoutMs: 1000,
      });
      replicas.push({ ...(await listen(server)), kube });
    }
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await redis.close();
    await api.close();
  });

  it('50 concurrent reporters x 40 reports, 25% duplicates, forced 409s: counters exact', async () => {
    // Seeded, so a failure can be replayed.
    const rng = seededRandom(20261122);
    const expected = { uploaded: 0, inferenceNumber: 0, hardExampleNumber: 0 };
    let unique = 0;
    let applied = 0;
    const reporter = async (r: number) => {
      const sent: Array<Record<string, unknown>> = [];
      let inference = 0;
      let hard = 0;
      for (let m = 0; m < 40; m += 1) {
        let message: Record<string, unknown>;
        if (sent.length > 0 && rng() < 0.25) {
          // A redelivery of an earlier report, possibly out of order.
          message = sent[Math.floor(rng() * sent.length)]!;
        } else {
          const more = 1 + Math.floor(rng() * 20);
          inference += more;
          hard += Math.floor(rng() * (more + 1));
          message = {
            id: `r${r}-m${m}`,
            reporter: `edge-pod-${r}:1700000000`,
            phase: 'Inference',
            status: 'Running',
            output: {
              taskInfo: { uploaded: hard, inferenceNumber: inference, hardExampleNumber: hard },
            },
          };
          sent.push(message);
          unique += 1;
        }
        const answer = await post((r + m) % 2, message);
        expect(answer.status).toBe(200);
        if (((await answer.json()) as { applied: boolean }).applied) applied += 1;
      }
      expected.uploaded += hard;
      expected.inferenceNumber += inference;
      expected.hardExampleNumber += hard;
    };
    await Promise.all(Array.from({ length: 50 }, (_, r) => reporter(r)));

    expect(applied).toBe(unique);
    expect(replicas[0]!.kube.forced() + replicas[1]!.kube.forced()).toBeGreaterThan(0);
    const status = (await service())['status'] as Record<string, unknown>;
    expect(status).toMatchObject({
      uploadCount: expected.uploaded,
      inferenceNumber: expected.inferenceNumber,
      hardExampleNumber: expected.hardExampleNumber,
      workers: { edge: { state: 'Running' } },
    });
    expect(status['offloadRatio']).toBeCloseTo(
      expected.hardExampleNumber / expected.inferenceNumber,
      5,
    );
    // 2,000 reports over HTTP against the development API server: it ran past the default 20 s
    // on 2 cores beside a CPU-bound job, and a timed-out run's reporters go on into the next tests.
  }, 60_000);
});
