/**
 * upstream-status over real HTTP, with a real Redis and client-node against the development API
 * server: concurrent replicas lose and double-count nothing; bad reports change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConflictError } from '../../../shared/errors/index.js';
import { buildServer } from '../../../shared/http/index.js';
import type { Kube } from '../../../shared/k8s/index.js';
import {
  createReportCounters,
  createUpstream,
  secretTokens,
  signReport,
  upstreamStatusDefinition,
} from '../../../shared/status/index.js';
import type { ReportCounters } from '../../../shared/status/index.js';
import { seededRandom } from '../../../shared/training/random.js';
import { startApiServer } from '../../support/apiserver.js';
import { helmetDetectionSample } from '../../support/samples.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';

const ns = 'default';
const name = 'helmet-detection-demo';
const statusPath = `/${ns}/jointinferenceservices/${name}/status`;
const tokens = { edge0: 'edge0-token-0123456789', edge1: 'edge1-token-9876543210' };
const sample = helmetDetectionSample();

/** Fails every `every`-th status write with a 409 before it reaches the API server. */
function conflicting(kube: Kube, every: number): Kube & { forced: () => number } {
  let calls = 0;
  let forced = 0;
  return {
    ...kube,
    patchStatus(ref, patch) {
      calls += 1;
      if (calls % every === 0) {
        forced += 1;
        return Promise.reject(new ConflictError('forced conflict'));
      }
      return kube.patchStatus(ref, patch);
    },
    forced: () => forced,
  };
}

describe('upstream-status', () => {
  let api: TestApiServer;
  let redis: TestRedis;
  let counters: ReportCounters;
  const replicas: Array<Listening & { kube: ReturnType<typeof conflicting> }> = [];

  const post = (
    replica: number,
    body: unknown,
    headers: Record<string, string> = {
      'x-edgeai-node': 'edge0',
      authorization: `Bearer ${tokens.edge0}`,
    },
    path = statusPath,
  ) =>
    fetch(`${replicas[replica]!.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const service = () => api.kube.get({ kind: 'jointInferenceService', namespace: ns, name });
  const snapshot = async () => {
    const current = await service();
    return {
      status: current['status'],
      keys: (await redis.client.keys(`${redis.prefix}*`)).length,
    };
  };

  beforeAll(async () => {
    api = await startApiServer();
    redis = await testRedis();
    counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    for (const [node, token] of Object.entries(tokens)) {
      await api.kube.create('node', undefined, { metadata: { name: node } });
      await api.kube.create('secret', 'edgeai-system', {
        metadata: { name: `edgeai-node-${node}` },
        data: { token: Buffer.from(token).toString('base64') },
      });
    }
    await api.kube.create('jointInferenceService', ns, sample);
    for (let i = 0; i < 2; i += 1) {
      const kube = conflicting(api.kube, 4);
      const definition = upstreamStatusDefinition({
        upstream: createUpstream({ kube, counters, attempts: 20 }),
        tokens: secretTokens(api.kube, 'edgeai-system', 30_000),
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
  });

  const report = {
    id: 'bad-1',
    phase: 'Inference',
    status: 'Running',
    output: { taskInfo: { uploaded: 1, inferenceNumber: 2, hardExampleNumber: 1 } },
  };

  it.each<
    [string, unknown, Record<string, string> | undefined, string | undefined, number, RegExp]
  >([
    ['malformed JSON', '{"phase": ', undefined, undefined, 400, /JSON/],
    [
      'a count of the wrong type',
      { ...report, output: { taskInfo: { uploaded: '3' } } },
      undefined,
      undefined,
      400,
      /body\.output\.taskInfo\.uploaded: Invalid input: expected number, received string/,
    ],
    [
      'a negative count',
      { ...report, output: { taskInfo: { uploaded: -1 } } },
      undefined,
      undefined,
      400,
      /body\.output\.taskInfo\.uploaded: Too small/,
    ],
    [
      'more hard examples than inferences',
      {
        ...report,
        output: { taskInfo: { uploaded: 1, inferenceNumber: 1, hardExampleNumber: 2 } },
      },
      undefined,
      undefined,
      400,
      /hardExampleNumber: hardExampleNumber cannot exceed inferenceNumber/,
    ],
    [
      'an unknown state',
      { ...report, status: 'Dancing' },
      undefined,
      undefined,
      400,
      /body\.status: must be one of Pending, Running, Completed, Failed/,
    ],
    [
      'an unknown field',
      { ...report, uploaded: 3 },
      undefined,
      undefined,
      400,
      /Unrecognized key: "uploaded"/,
    ],
    [
      'a missing phase',
      { status: 'Running' },
      undefined,
      undefined,
      400,
      /body\.phase: Invalid input/,
    ],
    [
      'an invalid namespace',
      report,
      undefined,
      `/Default/jointinferenceservices/${name}/status`,
      400,
      /path\.namespace: must be a lowercase RFC 1123 label/,
    ],
    [
      'an unknown service',
      report,
      undefined,
      `/${ns}/jointinferenceservices/nope/status`,
      404,
      /jointinferenceservice default\/nope not found/,
    ],
    [
      'an oversize body',
      { ...report, message: 'x'.repeat(5000) },
      undefined,
      undefined,
      413,
      /4096/,
    ],
    ['no credentials', report, {}, undefined, 401, /X-Edgeai-Node header: required/],
    ['no token', report, { 'x-edgeai-node': 'edge0' }, undefined, 401, /Authorization header/],
    [
      'a wrong token',
      report,
      { 'x-edgeai-node': 'edge0', authorization: `Bearer ${tokens.edge1}` },
      undefined,
      401,
      /node edge0: token not accepted/,
    ],
    [
      'an unknown node',
      report,
      { 'x-edgeai-node': 'edge9', authorization: 'Bearer x' },
      undefined,
      401,
      /node edge9: token not accepted/,
    ],
    [
      'the wrong node',
      report,
      { 'x-edgeai-node': 'edge1', authorization: `Bearer ${tokens.edge1}` },
      undefined,
      403,
      /node edge1 does not run the edge worker of default\/helmet-detection-demo/,
    ],
  ])('%s: a precise 4xx, state unchanged', async (_case, body, headers, path, status, message) => {
    const before = await snapshot();
    const answer = await post(0, body, headers, path);
    expect(answer.status).toBe(status);
    const answered = (await answer.json()) as { error: { message: string } };
    expect(answered.error.message).toMatch(message);
    expect(await snapshot()).toEqual(before);
  });

  it('takes the report as a signed CloudEvent, and refuses a bad signature or subject', async () => {
    const data = {
      id: 'event-report',
      reporter: 'edge-pod-ce:1',
      phase: 'Inference',
      status: 'Failed',
      exitCode: 137,
      output: { taskInfo: { uploaded: 5, inferenceNumber: 10, hardExampleNumber: 5 } },
    };
    const subject = `${ns}/jointinferenceservices/${name}`;
    const send = (id: string, headers: Record<string, string>) =>
      postEvent(replicas[1]!.url, 'io.edgeai.jointinference.status.reported', data, {
        'ce-id': id,
        'ce-source': '/edge/edge0',
        'ce-subject': subject,
        'ce-edgeainode': 'edge0',
        ...headers,
      });
    const before = await snapshot();
    const forged = await send('e1', {
      'ce-edgeaisig': signReport(Buffer.from('guess'), 'e1', subject, data),
    });
    expect(forged.status).toBe(401);
    expect(await forged.text()).toMatch(/node edge0: signature not accepted/);
    const wrongSubject = await send('e1', {
      'ce-subject': 'default/models/x',
      'ce-edgeaisig': '0'.repeat(64),
    });
    expect(wrongSubject.status).toBe(400);
    expect(await wrongSubject.text()).toMatch(/subject: expected/);
    expect(await snapshot()).toEqual(before);

    const signature = signReport(Buffer.from(tokens.edge0), 'e1', subject, data);
    expect((await send('e1', { 'ce-edgeaisig': signature })).status).toBe(202);
    expect((await send('e1', { 'ce-edgeaisig': signature })).status).toBe(202);
    const status = (await service())['status'] as Record<string, number> & {
      workers: { edge: Record<string, unknown> };
    };
    expect(status.uploadCount).toBe((before.status as Record<string, number>)['uploadCount']! + 5);
    expect(status.workers.edge).toMatchObject({ state: 'Failed', exitCode: 137 });
  });
});
