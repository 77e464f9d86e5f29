/**
 * upstream-status over real HTTP, with a real Redis and client-node against the development API
 * server: what each report does to the status; bad reports change nothing. (Concurrent replicas
 * under load: upstream-concurrency.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { buildServer } from '../../../shared/http/index.js';
import type { Kube } from '../../../shared/k8s/index.js';
import {
  createReportCounters,
  createUpstream,
  secretTokens,
  signReport,
  statusFromTotals,
  upstreamStatusDefinition,
} from '../../../shared/status/index.js';
import type { ReportCounters } from '../../../shared/status/index.js';
import { startApiServer } from '../../support/apiserver.js';
import { conflicting } from '../../support/kube-faults.js';
import { helmetDetectionSample } from '../../support/samples.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { qualityReport } from '../../support/worker-quality.js';

const ns = 'default';
const name = 'helmet-detection-demo';
const statusPath = `/${ns}/jointinferenceservices/${name}/status`;
const tokens = {
  edge0: 'edge0-token-0123456789',
  edge1: 'edge1-token-9876543210',
  intruder: 'intruder-token-5555555555',
};
const maxReportAgeMs = 600_000;
const sample = helmetDetectionSample();

/** Refuses a status write as the API server does one the CRD schema forbids (422). */
function crdChecked(kube: Kube): Kube {
  return {
    ...kube,
    patchStatus(ref, patch) {
      const ratio = (patch['status'] as { offloadRatio?: number } | undefined)?.offloadRatio;
      if (ratio !== undefined && ratio > 1) {
        return Promise.reject(
          new ValidationError(
            `API server: JointInferenceService.edgeai.io "${ref.name}" is invalid: status.offloadRatio: Invalid value: ${ratio}: should be less than or equal to 1`,
          ),
        );
      }
      return kube.patchStatus(ref, patch);
    },
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
      keys: (await redis.keys()).length,
    };
  };

  const extra: Listening[] = [];
  /** One more upstream-status replica, over `kube`. */
  const serve = async (kube: Kube): Promise<Listening> => {
    const definition = upstreamStatusDefinition({
      upstream: createUpstream({ kube, counters, attempts: 3 }),
      tokens: secretTokens(api.kube, 'edgeai-system', 30_000),
      maxReportAgeMs,
      readiness: [],
    });
    const listening = await listen(
      buildServer(definition, {
        telemetry: capturedTelemetry('upstream-status'),
        bodyLimitBytes: 4096,
        readinessTimeoutMs: 1000,
      }),
    );
    extra.push(listening);
    return listening;
  };
  /**
   * A copy of the sample named `serviceName`, its edge worker's placement replaced (and its
   * cloud worker's, when `cloudPlacement` is given).
   */
  const createService = async (
    serviceName: string,
    edgePlacement: Record<string, unknown>,
    cloudPlacement?: Record<string, unknown>,
  ) => {
    const spec = sample['spec'] as Record<'edgeWorker' | 'cloudWorker', Record<string, unknown>>;
    const { nodeName: _pinned, ...edgeWorker } = spec.edgeWorker;
    const { nodeName: _cloudPinned, ...cloudWorker } = spec.cloudWorker;
    return api.kube.create('jointInferenceService', ns, {
      ...sample,
      metadata: { ...sample.metadata, name: serviceName },
      spec: {
        ...spec,
        edgeWorker: { ...edgeWorker, ...edgePlacement },
        cloudWorker:
          cloudPlacement === undefined ? spec.cloudWorker : { ...cloudWorker, ...cloudPlacement },
      },
    });
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
        maxReportAgeMs,
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
    await Promise.all([...replicas, ...extra].map((r) => r.close()));
    await redis.close();
    await api.close();
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
      'hard examples without inferences',
      { ...report, output: { taskInfo: { uploaded: 1, hardExampleNumber: 1 } } },
      undefined,
      undefined,
      400,
      /body\.output\.taskInfo\.inferenceNumber: required when hardExampleNumber is given/,
    ],
    [
      'more shadowed inputs than inferences',
      {
        ...report,
        output: { taskInfo: { uploaded: 1, inferenceNumber: 2, shadowNumber: 3 } },
      },
      undefined,
      undefined,
      400,
      /body\.output\.taskInfo\.shadowNumber: shadowNumber cannot exceed inferenceNumber/,
    ],
    [
      'a drift score without the verdict',
      {
        ...report,
        output: { ...report.output, quality: { driftScore: 7.2, driftThreshold: 3.1 } },
      },
      undefined,
      undefined,
      400,
      /body\.output\.quality\.drifting: required when driftScore is given/,
    ],
    [
      'an estimated loss over 100 points',
      { ...report, output: { ...report.output, quality: { estimatedJointLoss: 140 } } },
      undefined,
      undefined,
      400,
      /body\.output\.quality\.estimatedJointLoss: Too big/,
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

  const subject = `${ns}/jointinferenceservices/${name}`;
  /** Posts `data` as a report event from edge0; `headers` add to or replace the ce-* headers. */
  const sendEvent = (data: unknown, id: string, headers: Record<string, string>) =>
    postEvent(replicas[1]!.url, 'io.edgeai.jointinference.status.reported', data, {
      'ce-id': id,
      'ce-source': '/edge/edge0',
      'ce-subject': subject,
      'ce-edgeainode': 'edge0',
      ...headers,
    });
  /** Headers of a report event edge0 signed with `time` as the event's time. */
  const signed = (id: string, data: unknown, time: string) => ({
    'ce-time': time,
    'ce-edgeaisig': signReport(Buffer.from(tokens.edge0), id, subject, time, data),
  });
  const edgeWorkerStatus = async () =>
    ((await service())['status'] as { workers: { edge: Record<string, unknown> } }).workers.edge;

  it('takes the report as a signed CloudEvent, and refuses a bad signature or subject', async () => {
    const data = {
      id: 'event-report',
      reporter: 'edge-pod-ce:1',
      phase: 'Inference',
      status: 'Failed',
      exitCode: 137,
      output: { taskInfo: { uploaded: 5, inferenceNumber: 10, hardExampleNumber: 5 } },
    };
    const time = new Date().toISOString();
    const before = await snapshot();
    const forged = await sendEvent(data, 'e1', {
      'ce-time': time,
      'ce-edgeaisig': signReport(Buffer.from('guess'), 'e1', subject, time, data),
    });
    expect(forged.status).toBe(401);
    expect(await forged.text()).toMatch(/node edge0: signature not accepted/);
    const wrongSubject = await sendEvent(data, 'e1', {
      'ce-subject': 'default/models/x',
      'ce-edgeaisig': '0'.repeat(64),
    });
    expect(wrongSubject.status).toBe(400);
    expect(await wrongSubject.text()).toMatch(/subject: expected/);
    expect(await snapshot()).toEqual(before);

    expect((await sendEvent(data, 'e1', signed('e1', data, time))).status).toBe(202);
    expect((await sendEvent(data, 'e1', signed('e1', data, time))).status).toBe(202);
    const status = (await service())['status'] as Record<string, number> & {
      workers: { edge: Record<string, unknown> };
    };
    const uploadedBefore = (before.status as Record<string, number> | undefined)?.['uploadCount'];
    expect(status.uploadCount).toBe((uploadedBefore ?? 0) + 5);
    expect(status.workers.edge).toMatchObject({ state: 'Failed', exitCode: 137 });
  });

  it('dedupes a signed event by node and id: a replay under another source changes nothing', async () => {
    const failed = {
      id: 'replayed-report',
      reporter: 'edge-pod-replay:1',
      phase: 'Inference',
      status: 'Failed',
      exitCode: 1,
    };
    const headers = signed('replay-1', failed, new Date().toISOString());
    expect((await sendEvent(failed, 'replay-1', headers)).status).toBe(202);
    expect(await edgeWorkerStatus()).toMatchObject({ state: 'Failed', exitCode: 1 });
    // The worker recovers and says so.
    const running = await post(0, {
      ...report,
      id: 'replay-running',
      reporter: 'edge-pod-replay:2',
    });
    expect(running.status).toBe(200);
    const recovered = await edgeWorkerStatus();
    expect(recovered).toMatchObject({ state: 'Running' });

    // The captured Failed event, resent with a source of the sender's choosing.
    const replay = await sendEvent(failed, 'replay-1', {
      ...headers,
      'ce-source': '/somewhere/else',
    });
    expect(replay.status).toBe(202);
    expect(await edgeWorkerStatus()).toEqual(recovered);
  });

  it.each<[string, (data: unknown) => Record<string, string>, RegExp]>([
    [
      'an event older than the accepted age',
      (data) =>
        signed('stale-1', data, new Date(Date.now() - maxReportAgeMs - 60_000).toISOString()),
      /time attribute: .* is 660 s old, more than the 600 s accepted; refused as a possible replay/,
    ],
    [
      'an event dated ahead of the accepted age',
      (data) =>
        signed('stale-1', data, new Date(Date.now() + maxReportAgeMs + 60_000).toISOString()),
      /time attribute: .* is 660 s ahead of this server, more than the 600 s accepted/,
    ],
    [
      'an event without a time',
      (data) => {
        const { 'ce-time': _time, ...rest } = signed('stale-1', data, new Date().toISOString());
        return rest;
      },
      /time attribute: required on a signed report/,
    ],
    [
      'an event whose time is not the one signed',
      (data) => ({
        ...signed('stale-1', data, new Date(Date.now() - 3_600_000).toISOString()),
        'ce-time': new Date().toISOString(),
      }),
      /node edge0: signature not accepted/,
    ],
  ])('refuses %s: 401, state unchanged', async (_case, headersFor, message) => {
    const data = {
      id: 'stale-report',
      reporter: 'edge-pod-stale:1',
      phase: 'Inference',
      status: 'Failed',
      exitCode: 2,
      output: { taskInfo: { uploaded: 7, inferenceNumber: 7, hardExampleNumber: 7 } },
    };
    const before = await snapshot();
    const answer = await sendEvent(data, 'stale-1', headersFor(data));
    expect(answer.status).toBe(401);
    expect(await answer.text()).toMatch(message);
    expect(await snapshot()).toEqual(before);
  });

  it('an empty nodeSelector pins nothing: no node may report for that worker', async () => {
    await createService('unpinned', { nodeSelector: {} });
    const path = `/${ns}/jointinferenceservices/unpinned/status`;
    const before = await snapshot();
    const answer = await post(
      0,
      { ...report, id: 'unpinned-1' },
      { 'x-edgeai-node': 'edge1', authorization: `Bearer ${tokens.edge1}` },
      path,
    );
    expect(answer.status).toBe(403);
    expect(((await answer.json()) as { error: { message: string } }).error.message).toBe(
      'the edge worker of default/unpinned is not pinned to a node (no nodeName or nodeSelector), so no node may report for it',
    );
    expect(await snapshot()).toEqual(before);
  });

  it("a node cannot claim another node's reporter, as another role or at all", async () => {
    const created = await createService('claimed', { nodeName: 'edge0' }, {});
    const path = `/${ns}/jointinferenceservices/claimed/status`;
    const tag = `${ns}/claimed/${created.metadata.uid ?? ''}`;
    const asIntruder = { 'x-edgeai-node': 'intruder', authorization: `Bearer ${tokens.intruder}` };
    const counts = (n: number) => ({
      output: { taskInfo: { uploaded: n, inferenceNumber: n, hardExampleNumber: n } },
    });
    const real = { ...report, reporter: 'edge-pod:1', worker: 'edge' };
    expect(
      (await post(0, { ...real, id: 'claimed-1', ...counts(100) }, undefined, path)).status,
    ).toBe(200);

    const before = await snapshot();
    const asEdge = await post(
      0,
      { ...real, id: 'claim-1', ...counts(1_000_000) },
      asIntruder,
      path,
    );
    expect(asEdge.status).toBe(403);
    expect(await asEdge.text()).toMatch(
      /node intruder does not run the edge worker of default\/claimed/,
    );
    // The cloud worker is pinned nowhere: no node token speaks for it.
    const asCloud = await post(
      0,
      { ...real, worker: 'cloud', id: 'claim-2', ...counts(1_000_000) },
      asIntruder,
      path,
    );
    expect(asCloud.status).toBe(403);
    expect(await asCloud.text()).toMatch(
      /the cloud worker of default\/claimed is not pinned to a node \(no nodeName or nodeSelector\)/,
    );
    expect(await snapshot()).toEqual(before);

    // Pinned to the intruder, the cloud worker is its to report, but only under its own name.
    await api.kube.patch(
      { kind: 'jointInferenceService', namespace: ns, name: 'claimed' },
      { spec: { cloudWorker: { nodeName: 'intruder' } } },
    );
    const pinned = await post(
      0,
      { ...real, worker: 'cloud', id: 'claim-3', ...counts(1_000_000) },
      asIntruder,
      path,
    );
    expect(pinned.status).toBe(200);
    expect(
      (await post(0, { ...real, id: 'claimed-2', ...counts(500) }, undefined, path)).status,
    ).toBe(200);
    expect((await counters.totals(tag)).counters).toEqual({
      uploaded: 1_000_500,
      inferenceNumber: 1_000_500,
      hardExampleNumber: 1_000_500,
      shadowNumber: 0,
    });
  });

  it('keeps offloadRatio within 1 when the totals hold more hard examples than inferences', async () => {
    expect(
      statusFromTotals({
        counters: { uploaded: 3, inferenceNumber: 2, hardExampleNumber: 5, shadowNumber: 0 },
        workers: {},
      })['offloadRatio'],
    ).toBe(1);

    // Totals from before reports had to pair the two counts: status writes must still work.
    const created = await createService('overcounted', { nodeName: 'edge0' });
    await counters.record(
      `${ns}/overcounted/${created.metadata.uid ?? ''}`,
      { source: 'before', id: 'hard-only' },
      { node: 'edge0', id: 'edge-pod-old:1' },
      {
        worker: 'edge',
        phase: 'Inference',
        status: 'Running',
        output: { taskInfo: { uploaded: 9, hardExampleNumber: 9 } },
      },
      new Date(0).toISOString(),
    );
    const replica = await serve(crdChecked(api.kube));
    const answer = await fetch(`${replica.url}/${ns}/jointinferenceservices/overcounted/status`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-edgeai-node': 'edge0',
        authorization: `Bearer ${tokens.edge0}`,
      },
      body: JSON.stringify({ ...report, id: 'overcounted-1' }),
    });
    expect(answer.status).toBe(200);
    const current = await api.kube.get({
      kind: 'jointInferenceService',
      namespace: ns,
      name: 'overcounted',
    });
    expect(current['status']).toMatchObject({
      inferenceNumber: 2,
      hardExampleNumber: 10,
      offloadRatio: 1,
    });
  });

  it('shows shadowCount and shadowRatio like offloadRatio: 6 decimals, within 1', () => {
    const status = (inferenceNumber: number, shadowNumber: number) =>
      statusFromTotals({
        counters: { uploaded: 0, inferenceNumber, hardExampleNumber: 0, shadowNumber },
        workers: {},
      });
    expect(status(3, 1)).toMatchObject({ shadowCount: 1, shadowRatio: 0.333333 });
    expect(status(0, 0)).toMatchObject({ shadowCount: 0, shadowRatio: 0 });
    expect(status(2, 5)).toMatchObject({ shadowCount: 5, shadowRatio: 1 });
    expect(status(2, 5)['quality']).toBeUndefined();
  });

  it('shows the shadow count once per report and the latest quality, whole, in the status', async () => {
    await createService('shadowed', { nodeName: 'edge0' });
    const path = `/${ns}/jointinferenceservices/shadowed/status`;
    const read = async () =>
      (await api.kube.get({ kind: 'jointInferenceService', namespace: ns, name: 'shadowed' }))[
        'status'
      ] as Record<string, unknown>;
    const quality = qualityReport;
    const shadowReport = (id: string, inferenceNumber: number, shadowNumber: number) => ({
      id,
      reporter: 'edge-pod-shadow:1',
      phase: 'Inference',
      status: 'Running',
      output: {
        taskInfo: { uploaded: 0, inferenceNumber, hardExampleNumber: 0, shadowNumber },
      },
    });
    const first = {
      ...shadowReport('shadow-1', 400, 20),
      output: { ...shadowReport('shadow-1', 400, 20).output, quality },
    };
    expect((await post(0, first, undefined, path)).status).toBe(200);
    // Resent, to the other replica: counted once.
    const again = await post(1, first, undefined, path);
    expect(again.status).toBe(200);
    expect(((await again.json()) as { applied: boolean }).applied).toBe(false);
    const shown = await read();
    expect(shown).toMatchObject({ inferenceNumber: 400, shadowCount: 20, shadowRatio: 0.05 });
    const { reportTime: firstTime, ...firstQuality } = shown['quality'] as Record<string, unknown>;
    expect(firstQuality).toEqual(quality);
    expect(firstTime).toBeTypeOf('string');

    // A report without quality moves the counts and leaves the quality as it was.
    expect((await post(0, shadowReport('shadow-2', 500, 30), undefined, path)).status).toBe(200);
    const counted = await read();
    expect(counted).toMatchObject({ inferenceNumber: 500, shadowCount: 30, shadowRatio: 0.06 });
    expect(counted['quality']).toEqual({ ...quality, reportTime: firstTime });

    // A later quality report replaces the last: the fields it lacks leave the status.
    const later = { estimatedEdgeAccuracy: 0.97, driftScore: 0.8, drifting: false };
    const third = {
      ...shadowReport('shadow-3', 600, 31),
      output: { ...shadowReport('shadow-3', 600, 31).output, quality: later },
    };
    expect((await post(1, third, undefined, path)).status).toBe(200);
    const { reportTime, ...replaced } = (await read())['quality'] as Record<string, unknown>;
    expect(replaced).toEqual(later);
    expect(Date.parse(String(reportTime))).toBeGreaterThanOrEqual(Date.parse(String(firstTime)));
  });

  it('answers 500, not 400, when the API server refuses our own status write', async () => {
    const created = await createService('refused', { nodeName: 'edge0' });
    const refusing: Kube = {
      ...api.kube,
      patchStatus: (ref) =>
        Promise.reject(
          new ValidationError(
            `API server: JointInferenceService.edgeai.io "${ref.name}" is invalid`,
          ),
        ),
    };
    const replica = await serve(refusing);
    const answer = await fetch(`${replica.url}/${ns}/jointinferenceservices/refused/status`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-edgeai-node': 'edge0',
        authorization: `Bearer ${tokens.edge0}`,
      },
      body: JSON.stringify({ ...report, id: 'refused-1' }),
    });
    expect(answer.status).toBe(500);
    // The report itself is recorded; a retry once the write works brings the status up to it.
    const totals = await counters.totals(`${ns}/refused/${created.metadata.uid ?? ''}`);
    expect(totals.counters).toEqual({
      uploaded: 1,
      inferenceNumber: 2,
      hardExampleNumber: 1,
      shadowNumber: 0,
    });
  });
});
