/** reconcile-tick over HTTP: ApiServerSource events and the PingSource tick as CloudEvents. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createController,
  jointInferenceKind,
  reconcileTickDefinition,
} from '../../../shared/controller/index.js';
import { buildServer } from '../../../shared/http/index.js';
import { startApiServer } from '../../support/apiserver.js';
import { helmetDetectionSample } from '../../support/samples.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const sample = helmetDetectionSample();
const ns = 'default';

describe('reconcile-tick function', () => {
  let api: TestApiServer;
  let fn: Listening;

  const send = (type: string, data: unknown) => postEvent(fn.url, type, data);
  const workers = async () =>
    (await api.kube.list('knativeService', { namespace: ns })).items.map((w) => w.metadata.name);

  beforeAll(async () => {
    api = await startApiServer();
    for (const node of ['edge0', 'solar-corona-cloud'])
      await api.kube.create('node', undefined, { metadata: { name: node } });
    for (const model of ['small-model', 'big-model']) {
      await api.kube.create('model', ns, {
        metadata: { name: model },
        spec: { url: `file:///models/${model}.onnx`, format: 'onnx' },
      });
    }
    const telemetry = capturedTelemetry('reconcile-tick');
    const controller = createController({
      kube: api.kube,
      kinds: [
        jointInferenceKind({
          image: 'edgeai:test',
          upstreamStatusUrl: undefined,
          workerSecret: undefined,
        }),
      ],
      heartbeatMs: 3_600_000,
      log: telemetry.log,
    });
    const definition = reconcileTickDefinition({
      controller,
      readiness: [{ name: 'kubernetes', check: () => api.kube.ping() }],
    });
    fn = await listen(
      buildServer(definition, { telemetry, bodyLimitBytes: 1 << 20, readinessTimeoutMs: 1000 }),
    );
  });
  afterAll(async () => {
    await fn.close();
    await api.close();
  });

  it('reconciles the service named by an ApiServerSource add event', async () => {
    const created = await api.kube.create('jointInferenceService', ns, sample);
    const answer = await send('dev.knative.apiserver.resource.add', created);
    expect(answer.status).toBe(202);
    expect((await workers()).sort()).toEqual([
      'helmet-detection-demo-cloud',
      'helmet-detection-demo-edge',
    ]);
  });

  it('recreates a worker when the delete event of that worker arrives', async () => {
    const edge = await api.kube.get({
      kind: 'knativeService',
      namespace: ns,
      name: 'helmet-detection-demo-edge',
    });
    await api.kube.delete({ kind: 'knativeService', namespace: ns, name: edge.metadata.name });
    const answer = await send('dev.knative.apiserver.resource.delete', edge);
    expect(answer.status).toBe(202);
    expect(await workers()).toContain('helmet-detection-demo-edge');
  });

  it('reconciles the services using a Model when its event arrives', async () => {
    const spec = structuredClone(sample['spec']) as { edgeWorker: { model: { name: string } } };
    spec.edgeWorker.model.name = 'late-model';
    const late = await api.kube.create('jointInferenceService', ns, {
      metadata: { name: 'late' },
      spec,
    });
    expect((await send('dev.knative.apiserver.resource.add', late)).status).toBe(202);
    const status = async () =>
      (await api.kube.get({ kind: 'jointInferenceService', namespace: ns, name: 'late' }))[
        'status'
      ] as { conditions: Array<{ type: string; reason: string }> };
    expect((await status()).conditions[0]).toMatchObject({
      type: 'Ready',
      reason: 'ModelNotFound',
    });
    const model = await api.kube.create('model', ns, {
      metadata: { name: 'late-model' },
      spec: { url: 'file:///models/late.onnx', format: 'onnx' },
    });
    expect((await send('dev.knative.apiserver.resource.add', model)).status).toBe(202);
    expect(await workers()).toContain('late-edge');
    expect((await status()).conditions[0]).toMatchObject({ type: 'Ready', reason: 'Deploying' });
    await api.kube.delete({ kind: 'jointInferenceService', namespace: ns, name: 'late' });
  });

  it('answers the PingSource tick, and reports a tick over plain HTTP', async () => {
    expect((await send('dev.knative.sources.ping', { message: 'tick' })).status).toBe(202);
    const tick = await fetch(`${fn.url}/tick`, { method: 'POST' });
    expect(tick.status).toBe(200);
    expect(await tick.json()).toEqual({
      objects: 1,
      writes: 0,
      conflicts: 0,
      failed: 0,
      kinds: { jointInferenceService: { objects: 1, writes: 0, conflicts: 0, failed: 0 } },
    });
  });

  it.each([
    [
      'an object of an unknown kind',
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: ns } },
      /data\.kind: ApiServerSource event for v1 ConfigMap is not handled/,
    ],
    [
      'an object without a namespace',
      { apiVersion: 'edgeai.io/v1alpha1', kind: 'JointInferenceService', metadata: { name: 'x' } },
      /data\.metadata\.namespace: required/,
    ],
    ['no metadata', { apiVersion: 'v1', kind: 'Pod' }, /data\.metadata: Invalid input/],
  ])('refuses %s with 400, writing nothing', async (_case, data, message) => {
    api.resetCalls();
    const answer = await send('dev.knative.apiserver.resource.update', data);
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: { message: string } }).error.message).toMatch(
      message,
    );
    expect(api.writes()).toBe(0);
  });

  it('is ready while the API server answers', async () => {
    expect((await fetch(`${fn.url}/health/readiness`)).status).toBe(200);
  });
});
