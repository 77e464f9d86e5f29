/**
 * Seed 001's scenarios and seed 000's validations, end to end through client-node against the
 * development API server: the test plays Knative Serving's part by marking worker Services ready.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createReconciler, labels } from '../../../shared/controller/index.js';
import type { Reconciler, ServiceObject } from '../../../shared/controller/index.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { startApiServer } from '../../support/apiserver.js';
import { helmetDetectionSample } from '../../support/samples.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry } from '../../support/http.js';

const sample = helmetDetectionSample();
const ns = 'default';
const name = 'helmet-detection-demo';

describe('reconcile-tick against the development API server', () => {
  let api: TestApiServer;
  let reconciler: Reconciler;
  let clock = Date.parse('2026-11-22T10:00:00Z');

  const jis = async () =>
    (await api.kube.get({ kind: 'jointInferenceService', namespace: ns, name })) as ServiceObject;
  const worker = (role: 'edge' | 'cloud') =>
    api.kube.get({ kind: 'knativeService', namespace: ns, name: `${name}-${role}` });
  const condition = async (type: string) =>
    (await jis()).status?.conditions?.find((c) => c.type === type);
  const env = (service: KubeObject) =>
    Object.fromEntries(
      (
        service['spec'] as {
          template: {
            spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> };
          };
        }
      ).template.spec.containers[0]!.env.map((e) => [e.name, e.value]),
    );
  /** What Knative Serving would do once a revision is up. */
  const markReady = async (role: 'edge' | 'cloud') => {
    const current = await worker(role);
    await api.kube.patchStatus(
      { kind: 'knativeService', namespace: ns, name: current.metadata.name },
      {
        status: {
          observedGeneration: current.metadata.generation,
          conditions: [{ type: 'Ready', status: 'True' }],
        },
      },
    );
  };
  const createModels = async () => {
    for (const model of ['small-model', 'big-model']) {
      await api.kube.create('model', ns, {
        metadata: { name: model },
        spec: { url: `file:///models/${model}.onnx`, format: 'onnx' },
      });
    }
  };
  const events = async () =>
    (await api.kube.list('event', { namespace: ns })).items.map((e) => String(e['reason']));

  beforeAll(async () => {
    api = await startApiServer();
  });
  afterAll(() => api.close());

  beforeEach(async () => {
    for (const kind of ['jointInferenceService', 'knativeService', 'model', 'node'] as const) {
      for (const item of (await api.kube.list(kind)).items) {
        await api.kube.delete({
          kind,
          namespace: item.metadata.namespace,
          name: item.metadata.name,
        });
      }
    }
    for (const node of ['edge0', 'solar-corona-cloud']) {
      await api.kube.create('node', undefined, { metadata: { name: node } });
    }
    reconciler = createReconciler({
      kube: api.kube,
      settings: { image: 'edgeai:test', upstreamStatusUrl: undefined, workerSecret: undefined },
      heartbeatMs: 3_600_000,
      log: capturedTelemetry('reconcile-tick').log,
      now: () => new Date((clock += 1000)),
    });
  });

  it('accepts the seed sample unchanged; ModelNotFound until the Models exist, then Ready', async () => {
    await api.kube.create('jointInferenceService', ns, sample);
    await reconciler.tick();
    const ready = await condition('Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'ModelNotFound' });
    expect(ready?.message).toContain('"small-model" (spec.edgeWorker.model.name)');
    expect(ready?.message).toContain('"big-model" (spec.cloudWorker.model.name)');
    await expect(worker('edge')).rejects.toThrow(/not found/);
    expect(await events()).toContain('ModelNotFound');

    await createModels();
    await reconciler.tick();
    expect(await condition('Created')).toMatchObject({ status: 'True' });
    expect(await condition('Ready')).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
    const edge = await worker('edge');
    expect(edge.metadata.ownerReferences?.[0]).toMatchObject({
      kind: 'JointInferenceService',
      name,
      controller: true,
    });
    expect(env(edge)).toMatchObject({
      FUNCTION_TARGET: 'edge-infer',
      MODEL_URL: 'file:///models/small-model.onnx',
      HEM_NAME: 'IBT',
      CLOUD_URL: `http://${name}-cloud.${ns}.svc.cluster.local`,
      WORKER_PARAMETERS: '{"nms_threshold":"0.6"}',
    });
    expect(env(await worker('cloud'))).toMatchObject({
      FUNCTION_TARGET: 'cloud-infer',
      NODE_OPTIONS: '--max-semi-space-size=32',
    });

    await markReady('edge');
    await reconciler.tick();
    expect(await condition('Degraded')).toMatchObject({ status: 'True' });
    await markReady('cloud');
    await reconciler.tick();
    const status = (await jis()).status;
    expect(status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True' });
    expect(status).toMatchObject({
      edgeWorkerState: 'Running',
      cloudWorkerState: 'Running',
      activeWorkers: 2,
      observedGeneration: 1,
    });
    expect(await events()).toContain('Ready');
  });

  it('names a missing node (NodeNotFound) and an invalid spec field (InvalidSpec)', async () => {
    await createModels();
    await api.kube.delete({ kind: 'node', name: 'edge0' });
    await api.kube.create('jointInferenceService', ns, sample);
    await reconciler.tick();
    expect(await condition('Ready')).toMatchObject({
      status: 'False',
      reason: 'NodeNotFound',
      message: 'Node "edge0" (spec.edgeWorker.nodeName) does not exist',
    });
    await api.kube.patch(
      { kind: 'jointInferenceService', namespace: ns, name },
      { spec: { edgeWorker: { hardExampleAlgorithm: { name: 'Guess' } } } },
    );
    await reconciler.tick();
    const ready = await condition('Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
    expect(ready?.message).toMatch(/^spec\.edgeWorker\.hardExampleAlgorithm\.name: Invalid option/);
  });

  describe('seed 001', () => {
    beforeEach(async () => {
      await createModels();
      await api.kube.create('jointInferenceService', ns, sample);
      await reconciler.tick();
      await markReady('edge');
      await markReady('cloud');
      await reconciler.tick();
      expect(await condition('Ready')).toMatchObject({ status: 'True' });
    });

    it('recreates a deleted worker on the next tick', async () => {
      await api.kube.delete({ kind: 'knativeService', namespace: ns, name: `${name}-edge` });
      await reconciler.tick();
      const recreated = await worker('edge');
      expect(recreated.metadata.labels?.[labels.role]).toBe('edge');
      expect(await events()).toContain('WorkerRecreated');
    });

    it('updates the workers when a spec parameter changes (generation bump)', async () => {
      const before = await worker('cloud');
      const spec = structuredClone(sample['spec']) as {
        edgeWorker: { workerSpec: { parameters: Array<{ key: string; value: string }> } };
      };
      spec.edgeWorker.workerSpec.parameters[0]!.value = '0.4';
      const patched = await api.kube.patch(
        { kind: 'jointInferenceService', namespace: ns, name },
        { spec },
      );
      expect(patched.metadata.generation).toBe(2);
      await reconciler.tick();
      const edge = await worker('edge');
      expect(env(edge)['WORKER_PARAMETERS']).toBe('{"nms_threshold":"0.4"}');
      expect(edge.metadata.annotations?.['edgeai.io/generation']).toBe('2');
      // The cloud worker's template did not change: Knative rolls no new revision for it.
      const cloud = await worker('cloud');
      expect(cloud['spec']).toEqual(before['spec']);
      expect((await jis()).status?.observedGeneration).toBe(2);
    });

    it('garbage-collects the workers when the service is deleted, and does not recreate them', async () => {
      await api.kube.delete({ kind: 'jointInferenceService', namespace: ns, name });
      await expect(worker('edge')).rejects.toThrow(/not found/);
      await expect(worker('cloud')).rejects.toThrow(/not found/);
      await reconciler.tick();
      expect((await api.kube.list('knativeService')).items).toEqual([]);
    });

    it('writes nothing to the workers on a status-only change, and nothing at all when steady', async () => {
      const before = [await worker('edge'), await worker('cloud')];
      await api.kube.patchStatus(
        { kind: 'jointInferenceService', namespace: ns, name },
        { status: { uploadCount: 7, inferenceNumber: 100 } },
      );
      api.resetCalls();
      const report = await reconciler.reconcileService(ns, name);
      expect(report.writes).toBe(0);
      const tick = await reconciler.tick();
      expect(tick).toMatchObject({ services: 1, writes: 0, conflicts: 0, failed: 0 });
      expect(api.writes()).toBe(0);
      const after = [await worker('edge'), await worker('cloud')];
      expect(after.map((w) => w.metadata.resourceVersion)).toEqual(
        before.map((w) => w.metadata.resourceVersion),
      );
      expect((await jis()).status?.uploadCount).toBe(7);
    });
  });
});
