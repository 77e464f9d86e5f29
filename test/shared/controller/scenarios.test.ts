/**
 * Seed 001's scenarios and seed 000's validations, end to end through client-node against the
 * development API server: the test plays Knative Serving's part by marking worker Services ready.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createController, jointInferenceKind } from '../../../shared/controller/index.js';
import { labels } from '../../../shared/controller/types.js';
import type { Controller, ServiceObject } from '../../../shared/controller/index.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { startApiServer } from '../../support/apiserver.js';
import { helmetDetectionSample } from '../../support/samples.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry } from '../../support/http.js';

const sample = helmetDetectionSample();
const ns = 'default';
const name = 'helmet-detection-demo';
const longNode = `edge-${'0'.repeat(59)}`;

describe('reconcile-tick against the development API server', () => {
  let api: TestApiServer;
  let reconciler: Controller;
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
    reconciler = createController({
      kube: api.kube,
      kinds: [
        jointInferenceKind({
          image: 'edgeai:test',
          upstreamStatusUrl: undefined,
          workerSecret: undefined,
        }),
      ],
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
    const cloudEnv = env(await worker('cloud'));
    expect(cloudEnv).toMatchObject({
      FUNCTION_TARGET: 'cloud-infer',
      NODE_OPTIONS: '--max-semi-space-size=32',
    });
    // The edge asks the cloud for the model the cloud worker serves (found by the local stack:
    // without it every offload was a 404 and fell back to the edge's answer).
    expect(env(edge)['CLOUD_MODEL_NAME']).toBe(cloudEnv['MODEL_NAME']);

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

  it('names a missing node (NodeNotFound); an invalid spec never reaches it (the API server refuses it)', async () => {
    await createModels();
    await api.kube.delete({ kind: 'node', name: 'edge0' });
    await api.kube.create('jointInferenceService', ns, sample);
    await reconciler.tick();
    expect(await condition('Ready')).toMatchObject({
      status: 'False',
      reason: 'NodeNotFound',
      message: 'Node "edge0" (spec.edgeWorker.nodeName) does not exist',
    });
    // The CRD schema (generated from the zod schema the controller parses with) refuses it, as a
    // cluster does; desiredState's own InvalidSpec answer is unit-tested in reconcile.test.ts.
    await expect(
      api.kube.patch(
        { kind: 'jointInferenceService', namespace: ns, name },
        { spec: { edgeWorker: { hardExampleAlgorithm: { name: 'Guess' } } } },
      ),
    ).rejects.toThrow(/spec\.edgeWorker\.hardExampleAlgorithm\.name: Unsupported value: "Guess"/);
    await reconciler.tick();
    expect(await condition('Ready')).toMatchObject({ status: 'False', reason: 'NodeNotFound' });
  });

  it.each([
    [
      'a nodeSelector that matches',
      { nodeSelector: { zone: 'a' } },
      'Created',
      'WorkersCreated',
      1,
    ],
    [
      'a nodeSelector that matches nothing',
      { nodeSelector: { zone: 'b' } },
      'Ready',
      'NodeNotFound',
      1,
    ],
    [
      'a nodeSelector no label can match',
      { nodeSelector: { zone: 'not a value!' } },
      'Ready',
      'NodeNotFound',
      0,
    ],
    ['a missing nodeName', { nodeName: 'edge9' }, 'Ready', 'NodeNotFound', 0],
    [
      'a nodeName too long for the kubernetes.io/hostname label',
      { nodeName: longNode },
      'Ready',
      'InvalidSpec',
      0,
    ],
    [
      'a missing Model',
      { nodeName: 'edge0', model: { name: 'tiny-model' } },
      'Ready',
      'ModelNotFound',
      0,
    ],
  ])(
    'an event reads only what the service names, and decides as the tick does: %s',
    async (_, edge, type, reason, nodeLists) => {
      await createModels();
      await api.kube.patch(
        { kind: 'node', name: 'edge0' },
        { metadata: { labels: { zone: 'a' } } },
      );
      // A Node may have a name that no label value can hold.
      await api.kube.create('node', undefined, { metadata: { name: longNode } });
      const spec = structuredClone(sample['spec']) as { edgeWorker: Record<string, unknown> };
      delete spec.edgeWorker['nodeName'];
      Object.assign(spec.edgeWorker, edge);
      await api.kube.create('jointInferenceService', ns, { metadata: { name }, spec });
      api.resetCalls();
      const event = await reconciler.reconcile('jointInferenceService', ns, name);
      expect(event.writes).toBeGreaterThan(0);
      // Models by name; Nodes by name, or one list filtered by the selector on the server.
      expect(api.calls.get('list model')).toBeUndefined();
      expect(api.calls.get('list node') ?? 0).toBe(nodeLists);
      expect(await condition(type)).toMatchObject({ reason });
      if (reason === 'WorkersCreated') {
        const pinned = (await worker('edge'))['spec'] as {
          template: { spec: { nodeSelector?: Record<string, string> } };
        };
        expect(pinned.template.spec.nodeSelector).toEqual({ zone: 'a' });
      }
      // The tick lists everything; having seen the same world, it finds nothing to change.
      const tick = await reconciler.tick();
      expect(tick).toMatchObject({ objects: 1, writes: 0, failed: 0 });
    },
  );

  it.each(['cam.v2', '2cams'])(
    'refuses the name %s, which no Knative Service can take, and creates nothing',
    async (badName) => {
      await createModels();
      await api.kube.create('jointInferenceService', ns, {
        metadata: { name: badName },
        spec: sample['spec'],
      });
      expect((await reconciler.tick()).failed).toBe(0);
      const stored = (await api.kube.get({
        kind: 'jointInferenceService',
        namespace: ns,
        name: badName,
      })) as ServiceObject;
      const created = stored.status?.conditions?.find((c) => c.type === 'Created');
      expect(created).toMatchObject({ status: 'False', reason: 'InvalidSpec' });
      expect(created?.message).toContain(`metadata.name: "${badName}"`);
      expect((await api.kube.list('knativeService')).items).toEqual([]);
      expect((await reconciler.tick()).writes).toBe(0);
    },
  );

  it('leaves a Knative Service it does not own alone, names the clash, and recovers once it is gone', async () => {
    await createModels();
    const foreign = {
      metadata: { name: `${name}-edge`, labels: { team: 'other' } },
      spec: { template: { spec: { containers: [{ image: 'someone/else' }] } } },
    };
    await api.kube.create('knativeService', ns, foreign);
    await api.kube.create('jointInferenceService', ns, sample);
    const first = await reconciler.tick();
    expect(first.failed).toBe(0);
    expect(await condition('Created')).toMatchObject({
      status: 'False',
      reason: 'WorkerNameTaken',
    });
    expect(await condition('Ready')).toMatchObject({ status: 'False', reason: 'WorkerNameTaken' });
    expect((await jis()).status?.edgeWorkerState).toBe('NameTaken');
    const untouched = await worker('edge');
    expect(untouched.metadata.labels).toEqual({ team: 'other' });
    expect(untouched.metadata.ownerReferences).toBeUndefined();
    expect(untouched['spec']).toEqual(foreign.spec);
    await worker('cloud');
    expect(await events()).toContain('WorkerNameTaken');
    // A steady clash writes nothing more.
    expect((await reconciler.tick()).writes).toBe(0);

    await api.kube.delete({ kind: 'knativeService', namespace: ns, name: `${name}-edge` });
    await reconciler.tick();
    expect((await worker('edge')).metadata.labels?.[labels.role]).toBe('edge');
    expect(await condition('Created')).toMatchObject({ status: 'True' });
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

    it('ends a cloud worker restart once its new revision is ready, with no report from it', async () => {
      await api.kube.patchStatus(
        { kind: 'jointInferenceService', namespace: ns, name },
        { status: { workers: { cloud: { state: 'Failed', exitCode: 137, reportTime: 't1' } } } },
      );
      await reconciler.tick();
      expect(await condition('Ready')).toMatchObject({
        status: 'False',
        reason: 'WorkerRestarting',
      });
      const restarted = (await worker('cloud'))['spec'] as {
        template: { metadata: { annotations: Record<string, string> } };
      };
      expect(restarted.template.metadata.annotations['edgeai.io/restarted-at']).toBeDefined();
      await reconciler.tick();
      expect(await condition('Restarting')).toMatchObject({ status: 'True' });
      await markReady('cloud');
      await reconciler.tick();
      expect(await condition('Restarting')).toMatchObject({ status: 'False' });
      expect(await condition('Ready')).toMatchObject({ status: 'True' });
      expect((await jis()).status?.cloudWorkerState).toBe('Running');
      expect((await reconciler.tick()).writes).toBe(0);
    });

    it('updates an edge worker that completed under OnFailure when the spec changes', async () => {
      const spec = structuredClone(sample['spec']) as {
        edgeWorker: {
          restartPolicy?: string;
          workerSpec: { parameters: Array<{ key: string; value: string }> };
        };
      };
      spec.edgeWorker.restartPolicy = 'OnFailure';
      await api.kube.patch({ kind: 'jointInferenceService', namespace: ns, name }, { spec });
      await reconciler.tick();
      await api.kube.patchStatus(
        { kind: 'jointInferenceService', namespace: ns, name },
        { status: { workers: { edge: { state: 'Completed', exitCode: 0, reportTime: 't1' } } } },
      );
      await reconciler.tick();
      expect(await condition('Failed')).toMatchObject({
        status: 'True',
        reason: 'WorkerCompleted',
      });
      spec.edgeWorker.workerSpec.parameters[0]!.value = '0.4';
      const patched = await api.kube.patch(
        { kind: 'jointInferenceService', namespace: ns, name },
        { spec },
      );
      await reconciler.tick();
      const edge = await worker('edge');
      expect(env(edge)['WORKER_PARAMETERS']).toBe('{"nms_threshold":"0.4"}');
      expect(edge.metadata.annotations?.['edgeai.io/generation']).toBe(
        String(patched.metadata.generation),
      );
      expect(await condition('Failed')).toMatchObject({ status: 'False' });
      expect(await events()).toContain('WorkerRetried');
      await markReady('edge');
      await reconciler.tick();
      expect(await condition('Ready')).toMatchObject({ status: 'True' });
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
      const report = await reconciler.reconcile('jointInferenceService', ns, name);
      expect(report.writes).toBe(0);
      const tick = await reconciler.tick();
      expect(tick).toMatchObject({ objects: 1, writes: 0, conflicts: 0, failed: 0 });
      expect(api.writes()).toBe(0);
      const after = [await worker('edge'), await worker('cloud')];
      expect(after.map((w) => w.metadata.resourceVersion)).toEqual(
        before.map((w) => w.metadata.resourceVersion),
      );
      expect((await jis()).status?.uploadCount).toBe(7);
    });
  });
});
