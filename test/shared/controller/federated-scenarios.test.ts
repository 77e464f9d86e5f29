/**
 * The FederatedLearningJob kind on the one reconcile engine, against the development API server
 * (what client-node talks to), with the rounds' progress as a fake port (the round store's tests
 * are shared/fl's): the sample in Sedna's shape deploys an aggregator and a trainer per Dataset,
 * owned by the job; a deleted trainer comes back; each restart policy judges a trainer's failure
 * (ExitCode's 1-127 and 128-255, the backoff limit); a finished job cleans its trainers up and
 * updates its Model, which rolls the JointInferenceService that uses it; a spec change reaches
 * the aggregator; two jobs keep apart; and a converged tick writes nothing.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  createController,
  federatedKind,
  jointInferenceKind,
  reconcileTickDefinition,
} from '../../../shared/controller/index.js';
import { buildServer } from '../../../shared/http/index.js';
import type { Controller } from '../../../shared/controller/index.js';
import type { JobProgress } from '../../../shared/controller/federated-reconcile.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { flJobConfig } from '../../../shared/messages/federated.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import { helmetDetectionSample } from '../../support/samples.js';

const ns = 'default';
const settings = { image: 'edgeai:test', upstreamStatusUrl: undefined, workerSecret: undefined };
const sample = parseAllDocuments(
  readFileSync(new URL('../../../knative/samples/federated-digits.yaml', import.meta.url), 'utf8'),
).map((d) => d.toJS() as KubeObject & { kind: string });

type Env = Array<{ name: string; value?: string; valueFrom?: unknown }>;
const containerOf = (service: KubeObject) =>
  (
    service['spec'] as {
      template: {
        metadata: { annotations: Record<string, string> };
        spec: { nodeSelector?: Record<string, string>; containers: Array<{ env: Env }> };
      };
    }
  ).template;
const envOf = (service: KubeObject) =>
  Object.fromEntries(containerOf(service).spec.containers[0]!.env.map((e) => [e.name, e.value]));

describe('the FederatedLearningJob controller against the development API server', () => {
  let api: TestApiServer;
  let controller: Controller;
  let clock = Date.parse('2026-11-27T10:00:00Z');
  const progress = new Map<string, JobProgress>();

  const job = async (name = 'digits') =>
    (await api.kube.get({ kind: 'federatedLearningJob', namespace: ns, name })) as KubeObject & {
      status?: Record<string, unknown> & {
        phase?: string;
        workers?: Record<string, Record<string, unknown>>;
        conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
      };
    };
  const service = (name: string) => api.kube.get({ kind: 'knativeService', namespace: ns, name });
  const services = async () =>
    (await api.kube.list('knativeService', { namespace: ns })).items
      .map((s) => s.metadata.name)
      .sort();
  const events = async () =>
    (await api.kube.list('event', { namespace: ns })).items.map((e) => String(e['reason']));
  const progressOf = async (name = 'digits') => {
    const { metadata } = await job(name);
    const id = `${ns}/${name}/${metadata.uid ?? ''}`;
    const current: JobProgress = progress.get(id) ?? {
      status: 'open',
      version: 0,
      sha: '0'.repeat(64),
      history: [],
      workers: new Map(),
    };
    return { id, current, set: (next: JobProgress) => progress.set(id, next) };
  };
  const fail = async (worker: string, exitCode: number, atMs: number) => {
    const { current, set } = await progressOf();
    const workers = new Map(current.workers);
    workers.set(worker, {
      accepted: 0,
      refused: 0,
      lastRound: 0,
      lastSeenMs: atMs,
      failure: { atMs, round: 1, exitCode, message: `exit ${exitCode}` },
    });
    set({ ...current, workers });
  };
  const setPolicy = async (restartPolicy: string, backoffLimit?: number) => {
    const stored = await job();
    const spec = stored['spec'] as { trainingWorkers: Array<Record<string, unknown>> };
    const trainingWorkers = spec.trainingWorkers.map((w) => ({
      ...w,
      restartPolicy,
      ...(backoffLimit === undefined ? {} : { backoffLimit }),
    }));
    await api.kube.patch(
      { kind: 'federatedLearningJob', namespace: ns, name: 'digits' },
      { spec: { trainingWorkers } },
    );
  };

  beforeAll(async () => {
    api = await startApiServer();
  });
  afterAll(() => api.close());

  beforeEach(async () => {
    progress.clear();
    for (const kind of [
      'federatedLearningJob',
      'jointInferenceService',
      'knativeService',
      'dataset',
      'model',
    ] as const) {
      for (const item of (await api.kube.list(kind)).items)
        await api.kube.delete({
          kind,
          namespace: item.metadata.namespace,
          name: item.metadata.name,
        });
    }
    controller = createController({
      kube: api.kube,
      kinds: [
        jointInferenceKind(settings),
        federatedKind(settings, { read: (id) => Promise.resolve(progress.get(id)) }),
      ],
      heartbeatMs: 3_600_000,
      log: capturedTelemetry('reconcile-tick').log,
      now: () => new Date((clock += 1000)),
    });
    for (const object of sample.filter((o) => o.kind !== 'FederatedLearningJob')) {
      const kind = object.kind === 'Dataset' ? 'dataset' : 'model';
      await api.kube.create(kind, ns, object);
    }
  });

  const applyJob = async (name = 'digits') => {
    const manifest = sample.find((o) => o.kind === 'FederatedLearningJob')!;
    await api.kube.create('federatedLearningJob', ns, {
      ...manifest,
      metadata: { ...manifest.metadata, name },
    });
  };

  it('deploys the sample, Sedna-shaped: an aggregator and one trainer per Dataset, owned and pinned', async () => {
    await applyJob();
    await controller.tick();
    expect(await services()).toEqual([
      'digits-aggregator',
      'digits-train-0',
      'digits-train-1',
      'digits-train-2',
    ]);
    const uid = (await job()).metadata.uid;
    for (const name of await services()) {
      const refs = (await service(name)).metadata.ownerReferences ?? [];
      expect(refs).toEqual([
        expect.objectContaining({ kind: 'FederatedLearningJob', uid, controller: true }),
      ]);
    }
    const trainer = await service('digits-train-1');
    expect(containerOf(trainer).spec.nodeSelector).toEqual({ 'kubernetes.io/hostname': 'edge1' });
    expect(envOf(trainer)).toMatchObject({
      FUNCTION_TARGET: 'fl-trainer',
      FL_WORKER: 'digits-edge1',
      DATASET_URL: 'file:///var/lib/edgeai/fl/digits-1.csv',
      FL_AGGREGATOR_URL: 'http://digits-aggregator.default.svc.cluster.local',
    });
    const aggregator = envOf(await service('digits-aggregator'));
    const config = flJobConfig.parse(JSON.parse(aggregator['FL_JOB_CONFIG'] ?? ''));
    expect(config.trainers.map((t) => [t.name, t.node])).toEqual([
      ['digits-edge0', 'edge0'],
      ['digits-edge1', 'edge1'],
      ['digits-edge2', 'edge2'],
    ]);
    // The models the trainers fetch are on the origin they trust.
    expect(config.publicUrl).toBe(envOf(trainer)['FL_AGGREGATOR_URL']);
    expect(containerOf(await service('digits-aggregator')).metadata.annotations).toMatchObject({
      'autoscaling.knative.dev/min-scale': '1',
    });
    const status = (await job()).status;
    expect(status?.conditions?.find((c) => c.type === 'Created')).toMatchObject({ status: 'True' });
    expect(status?.phase).toBe('Pending');
  });

  it('says which Dataset is missing, then deploys once it exists', async () => {
    await api.kube.delete({ kind: 'dataset', namespace: ns, name: 'digits-edge2' });
    await applyJob();
    await controller.tick();
    const ready = (await job()).status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'DatasetNotFound' });
    expect(ready?.message).toContain('"digits-edge2" (spec.trainingWorkers[2].dataset.name)');
    expect(await services()).toEqual([]);
    const dataset = sample.find((o) => o.metadata.name === 'digits-edge2')!;
    await api.kube.create('dataset', ns, dataset);
    await controller.reconcileUsers('dataset', ns, 'digits-edge2');
    expect(await services()).toHaveLength(4);
  });

  it('recreates a deleted trainer, and a converged tick writes nothing', async () => {
    await applyJob();
    await controller.tick();
    await controller.tick();
    expect((await controller.tick()).writes).toBe(0);
    await api.kube.delete({ kind: 'knativeService', namespace: ns, name: 'digits-train-0' });
    await controller.reconcile('federatedLearningJob', ns, 'digits');
    expect(await services()).toContain('digits-train-0');
  });

  it('ExitCode: 1-127 stops a trainer for good (left out of the rounds), 128-255 restarts it', async () => {
    await applyJob();
    await setPolicy('ExitCode');
    await controller.tick();
    await fail('digits-edge0', 137, clock);
    await controller.tick();
    const restarted = (await job()).status?.workers?.['digits-edge0'];
    expect(restarted).toMatchObject({
      outcome: 'Restarted',
      restarts: 1,
      exitCode: 137,
      state: 'Restarting',
    });
    const annotations = containerOf(await service('digits-train-0')).metadata.annotations;
    expect(annotations['edgeai.io/restarted-at']).toBe(restarted?.['restartedAt']);
    await fail('digits-edge1', 2, clock);
    await controller.tick();
    expect((await job()).status?.workers?.['digits-edge1']).toMatchObject({
      outcome: 'Permanent',
      state: 'Failed',
    });
    await controller.tick();
    const config = flJobConfig.parse(
      JSON.parse(envOf(await service('digits-aggregator'))['FL_JOB_CONFIG'] ?? ''),
    );
    expect(config.trainers.map((t) => t.name)).toEqual(['digits-edge0', 'digits-edge2']);
    expect(await events()).toEqual(expect.arrayContaining(['WorkerRestarted', 'WorkerFailed']));
  });

  it('OnFailure restarts until the backoff limit, then stops the trainer; Never never restarts', async () => {
    await applyJob();
    await setPolicy('OnFailure', 1);
    await controller.tick();
    await fail('digits-edge0', 1, clock);
    await controller.tick();
    expect((await job()).status?.workers?.['digits-edge0']).toMatchObject({
      outcome: 'Restarted',
      restarts: 1,
    });
    await fail('digits-edge0', 1, clock + 50);
    await controller.tick();
    const stopped = (await job()).status?.workers?.['digits-edge0'];
    expect(stopped).toMatchObject({ outcome: 'Permanent', restarts: 1 });
    await setPolicy('Never');
    await controller.tick();
    await fail('digits-edge2', 143, clock + 60);
    await controller.tick();
    expect((await job()).status?.workers?.['digits-edge2']).toMatchObject({ outcome: 'Permanent' });
  });

  it('fails the job when every trainer has failed for good', async () => {
    await applyJob();
    await setPolicy('Never');
    await controller.tick();
    for (const w of ['digits-edge0', 'digits-edge1', 'digits-edge2']) await fail(w, 3, clock);
    await controller.tick();
    await controller.tick();
    const status = (await job()).status;
    expect(status?.phase).toBe('Failed');
    expect(status?.conditions?.find((c) => c.type === 'Failed')).toMatchObject({ status: 'True' });
    expect(status?.['completionTime']).toBeDefined();
  });

  it('shows the rounds, then ends Succeeded: trainers cleaned up, the Model updated, its JointInferenceService rolled', async () => {
    await applyJob();
    const jis = helmetDetectionSample();
    for (const role of ['edgeWorker', 'cloudWorker'] as const)
      (jis['spec'] as Record<string, { model: { name: string } }>)[role]!.model.name = 'digits-fl';
    await api.kube.create('node', undefined, { metadata: { name: 'edge0' } });
    await api.kube
      .create('node', undefined, { metadata: { name: 'solar-corona-cloud' } })
      .catch(() => undefined);
    await api.kube.create('jointInferenceService', ns, jis);
    await controller.tick();
    const { current, set } = await progressOf();
    const round = (r: number, accuracy: number) => ({
      round: r,
      version: r,
      participants: 3,
      stragglers: [],
      closedBy: 'all' as const,
      durationMs: 1000,
      loss: 1 - accuracy,
      accuracy,
    });
    set({ ...current, version: 2, sha: 'a'.repeat(64), history: [round(2, 0.9), round(1, 0.8)] });
    await controller.tick();
    let status = (await job()).status;
    expect(status).toMatchObject({ round: 2, accuracy: 0.9, globalModel: { version: 2 } });
    expect((status?.['history'] as unknown[]).length).toBe(2);
    // OnCompletion: the Model is not touched while the job trains.
    const model = () => api.kube.get({ kind: 'model', namespace: ns, name: 'digits-fl' });
    expect((await model())['spec']).toMatchObject({
      url: 'file:///var/lib/edgeai/models/edge.onnx',
    });
    set({
      ...current,
      status: 'done',
      message: 'maxRounds 2 reached',
      version: 2,
      sha: 'a'.repeat(64),
      history: [round(2, 0.9), round(1, 0.8)],
    });
    await controller.tick();
    await controller.tick();
    status = (await job()).status;
    expect(status?.phase).toBe('Succeeded');
    expect(status?.conditions?.find((c) => c.type === 'Succeeded')).toMatchObject({
      status: 'True',
      message: 'maxRounds 2 reached',
    });
    expect(await services()).toEqual([
      'digits-aggregator',
      'helmet-detection-demo-cloud',
      'helmet-detection-demo-edge',
    ]);
    const url = 'http://digits-aggregator.default.svc.cluster.local/v1/models/2';
    expect((await model())['spec']).toMatchObject({ url, sha256: 'a'.repeat(64) });
    expect(
      containerOf(await service('digits-aggregator')).metadata.annotations[
        'autoscaling.knative.dev/min-scale'
      ],
    ).toBeUndefined();
    await controller.reconcileUsers('model', ns, 'digits-fl');
    expect(envOf(await service('helmet-detection-demo-edge'))).toMatchObject({ MODEL_URL: url });
    // The job's own Model update does not reach its aggregator: round 1's model stays pinned.
    const aggregator = flJobConfig.parse(
      JSON.parse(envOf(await service('digits-aggregator'))['FL_JOB_CONFIG'] ?? ''),
    );
    expect(aggregator.initialModel.url).toBe('file:///var/lib/edgeai/models/edge.onnx');
    expect((await job()).status?.['initialModel']).toMatchObject({
      url: 'file:///var/lib/edgeai/models/edge.onnx',
    });
    expect(await events()).toEqual(
      expect.arrayContaining(['ModelUpdated', 'StopConditionMet', 'TrainerCleaned']),
    );
  });

  it('carries a spec change to the aggregator (the rounds go on from the store)', async () => {
    await applyJob();
    await controller.tick();
    await api.kube.patch(
      { kind: 'federatedLearningJob', namespace: ns, name: 'digits' },
      { spec: { training: { epochs: 5 } } },
    );
    await controller.tick();
    const config = flJobConfig.parse(
      JSON.parse(envOf(await service('digits-aggregator'))['FL_JOB_CONFIG'] ?? ''),
    );
    expect(config.training.epochs).toBe(5);
    expect(await events()).toContain('WorkerUpdated');
  });

  it('runs FedBuff asynchronous rounds as asked, with their defaults', async () => {
    await applyJob();
    await controller.tick();
    const config = async () =>
      flJobConfig.parse(
        JSON.parse(envOf(await service('digits-aggregator'))['FL_JOB_CONFIG'] ?? ''),
      );
    await api.kube.patch(
      { kind: 'federatedLearningJob', namespace: ns, name: 'digits' },
      { spec: { aggregation: { algorithm: 'FedBuff', bufferSize: 2 } } },
    );
    await controller.tick();
    expect((await config()).aggregation).toEqual({
      kind: 'fedbuff',
      bufferSize: 2,
      maxStaleness: 5,
      stalenessExponent: 0.5,
      eta: 1,
    });
  });

  it('keeps two jobs in one namespace apart', async () => {
    await applyJob('digits');
    await applyJob('letters');
    await controller.tick();
    expect(await services()).toHaveLength(8);
    await fail('digits-edge0', 2, clock);
    await api.kube.delete({ kind: 'knativeService', namespace: ns, name: 'letters-train-1' });
    await controller.tick();
    expect((await job('letters')).status?.workers?.['digits-edge0']?.['outcome']).toBeUndefined();
    expect(await services()).toContain('letters-train-1');
    await api.kube.delete({ kind: 'federatedLearningJob', namespace: ns, name: 'letters' });
    expect((await services()).filter((s) => s.startsWith('letters-'))).toEqual([]);
    expect((await services()).filter((s) => s.startsWith('digits-'))).toHaveLength(4);
  });

  it("shows a round once its aggregator announces it (reconcile-tick's event), not at the next tick", async () => {
    await applyJob();
    await controller.tick();
    const telemetry = capturedTelemetry('reconcile-tick');
    const fn = await listen(
      buildServer(reconcileTickDefinition({ controller, readiness: [] }), {
        telemetry,
        bodyLimitBytes: 1 << 20,
        readinessTimeoutMs: 1000,
      }),
    );
    try {
      const { current, set } = await progressOf();
      const round = {
        round: 1,
        version: 1,
        participants: 3,
        stragglers: [],
        closedBy: 'all' as const,
        durationMs: 900,
      };
      set({ ...current, version: 1, sha: 'b'.repeat(64), history: [round] });
      const answer = await postEvent(fn.url, 'io.edgeai.fl.round.completed', round, {
        'ce-subject': 'default/digits',
      });
      expect(answer.status).toBe(202);
      expect((await job()).status).toMatchObject({ round: 1, globalModel: { version: 1 } });
      const bad = await postEvent(fn.url, 'io.edgeai.fl.round.completed', round, {
        'ce-subject': 'digits',
      });
      expect(bad.status).toBe(400);
    } finally {
      await fn.close();
    }
  });
});
