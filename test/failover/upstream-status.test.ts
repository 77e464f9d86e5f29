/**
 * upstream-status while Redis fails over: 50 reporters x 40 WorkerMessages over real HTTP to two
 * replicas, the master SIGKILLed after a quarter of them; every report answered 503 is sent
 * again (as Knative redelivers). The counters in the status must be exact: nothing lost, nothing
 * counted twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../shared/http/index.js';
import { hashTag } from '../../shared/redis/index.js';
import {
  createReportCounters,
  createUpstream,
  secretTokens,
  upstreamStatusDefinition,
} from '../../shared/status/index.js';
import { seededRandom } from '../../shared/random/index.js';
import { startApiServer } from '../support/apiserver.js';
import type { TestApiServer } from '../support/apiserver.js';
import { capturedTelemetry, listen } from '../support/http.js';
import type { Listening } from '../support/http.js';
import { helmetDetectionSample } from '../support/samples.js';
import { report, retrying, startFailoverRedis } from './redis-failover.js';
import type { FailoverRedis, Topology } from './redis-failover.js';

const ns = 'default';
const name = 'helmet-detection-demo';
const statusPath = `/${ns}/jointinferenceservices/${name}/status`;
const token = 'edge0-token-0123456789';
const reporters = 50;
const messagesEach = 40;

describe.each<Topology>(['sentinel', 'cluster'])('upstream-status, %s failover', (topology) => {
  let redis: FailoverRedis;
  let api: TestApiServer;
  let uid: string;
  const replicas: Listening[] = [];
  const logs: Array<Array<Record<string, unknown>>> = [];

  beforeAll(async () => {
    redis = await startFailoverRedis(topology);
    api = await startApiServer();
    await api.kube.create('node', undefined, { metadata: { name: 'edge0' } });
    await api.kube.create('secret', 'edgeai-system', {
      metadata: { name: 'edgeai-node-edge0' },
      data: { token: Buffer.from(token).toString('base64') },
    });
    const created = await api.kube.create('jointInferenceService', ns, helmetDetectionSample());
    uid = String((created['metadata'] as { uid: string }).uid);
    for (let i = 0; i < 2; i += 1) {
      const counters = createReportCounters(await redis.client(1), {
        dedupeSeconds: 3600,
        retentionSeconds: 3600,
      });
      const definition = upstreamStatusDefinition({
        upstream: createUpstream({ kube: api.kube, counters, attempts: 20 }),
        tokens: secretTokens(api.kube, 'edgeai-system', 30_000),
        maxReportAgeMs: 600_000,
        readiness: [],
      });
      const telemetry = capturedTelemetry('upstream-status');
      logs.push(telemetry.lines);
      const server = buildServer(definition, {
        telemetry,
        bodyLimitBytes: 4096,
        readinessTimeoutMs: 1000,
      });
      replicas.push(await listen(server));
    }
  }, 120_000);
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await api?.close();
    await redis?.stop();
  });

  it('counts every report once across the failover', async () => {
    const rng = seededRandom(20261124);
    const expected = { uploaded: 0, inferenceNumber: 0, hardExampleNumber: 0 };
    const counter = { unavailable: 0 };
    let sent = 0;
    let failover: Promise<void> | undefined;
    const post = (replica: number, message: unknown) =>
      retrying(async () => {
        const answer = await fetch(`${replicas[replica]!.url}${statusPath}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-edgeai-node': 'edge0',
            authorization: `Bearer ${token}`,
          },
          body: JSON.stringify(message),
        });
        if (answer.status === 503) return 'unavailable';
        const errors = logs.flat().filter((l) => l['status'] === 500);
        expect(answer.status, JSON.stringify(errors.slice(0, 3))).toBe(200);
        return answer.json();
      }, counter);
    const reporter = async (r: number) => {
      let inference = 0;
      let hard = 0;
      for (let m = 0; m < messagesEach; m += 1) {
        const more = 1 + Math.floor(rng() * 20);
        inference += more;
        hard += Math.floor(rng() * (more + 1));
        await post((r + m) % 2, {
          id: `r${r}-m${m}`,
          reporter: `edge-pod-${r}:1700000000`,
          phase: 'Inference',
          status: 'Running',
          output: {
            taskInfo: { uploaded: hard, inferenceNumber: inference, hardExampleNumber: hard },
          },
        });
        sent += 1;
        if (sent === (reporters * messagesEach) / 4) {
          failover = redis.failover(hashTag(`${ns}/${name}/${uid}`));
        }
      }
      expected.uploaded += hard;
      expected.inferenceNumber += inference;
      expected.hardExampleNumber += hard;
    };
    await Promise.all(Array.from({ length: reporters }, (_, r) => reporter(r)));
    await failover;

    const service = await api.kube.get({ kind: 'jointInferenceService', namespace: ns, name });
    const status = service['status'] as Record<string, number>;
    const counted = status['inferenceNumber'] ?? 0;
    report({
      scenario: 'upstream-status: 50 reporters x 40 WorkerMessages',
      topology,
      operations: reporters * messagesEach,
      failovers: redis.failovers,
      lost: Math.max(0, expected.inferenceNumber - counted),
      doubled: Math.max(0, counted - expected.inferenceNumber),
      unavailable: counter.unavailable,
    });
    expect(redis.failovers).toBe(1);
    expect(status).toMatchObject({
      uploadCount: expected.uploaded,
      inferenceNumber: expected.inferenceNumber,
      hardExampleNumber: expected.hardExampleNumber,
    });
  }, 180_000);
});
