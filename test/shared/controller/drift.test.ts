/**
 * DataDrift end to end: an edge report through upstream-status (real HTTP, real Redis), the
 * reconciler against the development API server, and the result read back through
 * @kubernetes/client-node as kubectl would see it. The test plays Knative Serving's part.
 */
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createController, jointInferenceKind } from '../../../shared/controller/index.js';
import type { Controller, ServiceObject } from '../../../shared/controller/index.js';
import { buildServer } from '../../../shared/http/index.js';
import {
  createReportCounters,
  createUpstream,
  secretTokens,
  upstreamStatusDefinition,
} from '../../../shared/status/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionSample } from '../../support/samples.js';

const ns = 'default';
const name = 'helmet-detection-demo';
const token = 'edge0-token-0123456789';
const jis = {
  group: 'edgeai.io',
  version: 'v1alpha1',
  namespace: ns,
  plural: 'jointinferenceservices',
};

describe('DataDrift through upstream-status and reconcile-tick', () => {
  let api: TestApiServer;
  let redis: TestRedis;
  let upstream: Listening;
  let reconciler: Controller;
  let objects: CustomObjectsApi;
  let core: CoreV1Api;
  let clock = Date.parse('2026-11-22T10:00:00Z');
  let reports = 0;

  /** The JointInferenceService as client-node reads it. */
  const read = async () =>
    (await objects.getNamespacedCustomObjectStatus({ ...jis, name })) as ServiceObject;
  const condition = async (type: string) =>
    (await read()).status?.conditions?.find((c) => c.type === type);
  const events = async () =>
    (await core.listNamespacedEvent({ namespace: ns })).items.map(
      (e) => `${e.type ?? ''} ${e.reason ?? ''}: ${e.message ?? ''}`,
    );
  /** What Knative Serving would do once a revision is up. */
  const markReady = async (role: 'edge' | 'cloud') => {
    const current = await api.kube.get({
      kind: 'knativeService',
      namespace: ns,
      name: `${name}-${role}`,
    });
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
  /** The edge worker's report, as its reporter sends it. */
  const report = async (quality: Record<string, unknown>) => {
    reports += 1;
    const answer = await fetch(`${upstream.url}/${ns}/jointinferenceservices/${name}/status`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-edgeai-node': 'edge0',
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify({
        id: `edge-pod:1-${reports}`,
        reporter: 'edge-pod:1',
        worker: 'edge',
        phase: 'Inference',
        status: 'Running',
        output: {
          taskInfo: {
            uploaded: 10 * reports,
            inferenceNumber: 100 * reports,
            hardExampleNumber: 10 * reports,
            shadowNumber: 5 * reports,
          },
          quality,
        },
      }),
    });
    expect(answer.status).toBe(200);
  };

  beforeAll(async () => {
    api = await startApiServer();
    redis = await testRedis();
    const config = new KubeConfig();
    config.loadFromFile(api.kubeconfigFile);
    objects = config.makeApiClient(CustomObjectsApi);
    core = config.makeApiClient(CoreV1Api);

    for (const node of ['edge0', 'solar-corona-cloud']) {
      await api.kube.create('node', undefined, { metadata: { name: node } });
    }
    await api.kube.create('secret', 'edgeai-system', {
      metadata: { name: 'edgeai-node-edge0' },
      data: { token: Buffer.from(token).toString('base64') },
    });
    for (const model of ['small-model', 'big-model']) {
      await api.kube.create('model', ns, {
        metadata: { name: model },
        spec: { url: `file:///models/${model}.onnx`, format: 'onnx' },
      });
    }
    const counters = createReportCounters(redis.client, {
      dedupeSeconds: 3600,
      retentionSeconds: 3600,
    });
    upstream = await listen(
      buildServer(
        upstreamStatusDefinition({
          upstream: createUpstream({ kube: api.kube, counters, attempts: 3 }),
          tokens: secretTokens(api.kube, 'edgeai-system', 30_000),
          maxReportAgeMs: 600_000,
          readiness: [],
        }),
        {
          telemetry: capturedTelemetry('upstream-status'),
          bodyLimitBytes: 4096,
          readinessTimeoutMs: 1000,
        },
      ),
    );
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
  afterAll(async () => {
    await upstream.close();
    await redis.close();
    await api.close();
  });

  it('appears when the edge reports drift and clears when it stops, Ready throughout', async () => {
    const spec = structuredClone(helmetDetectionSample()['spec']) as {
      edgeWorker: Record<string, unknown>;
    };
    spec.edgeWorker['offload'] = { accuracyObjective: 2, shadowRate: 0.1 };
    await api.kube.create('jointInferenceService', ns, { metadata: { name }, spec });
    await reconciler.tick();
    await markReady('edge');
    await markReady('cloud');
    await reconciler.tick();
    expect(await condition('Ready')).toMatchObject({ status: 'True' });
    expect(await condition('DataDrift')).toBeUndefined();
    const edge = (await objects.getNamespacedCustomObject({
      group: 'serving.knative.dev',
      version: 'v1',
      namespace: ns,
      plural: 'services',
      name: `${name}-edge`,
    })) as {
      spec: { template: { spec: { containers: Array<{ env: Array<{ name: string }> }> } } };
    };
    expect(edge.spec.template.spec.containers[0]?.env).toEqual(
      expect.arrayContaining([
        { name: 'ACCURACY_OBJECTIVE', value: '2' },
        { name: 'SHADOW_RATE', value: '0.1' },
      ]),
    );

    // Estimates without a drift test: shown, but no condition.
    await report({ accuracyObjective: 2, estimatedEdgeAccuracy: 0.95, estimatedJointLoss: 0.8 });
    await reconciler.tick();
    expect(await condition('DataDrift')).toBeUndefined();

    await report({
      accuracyObjective: 2,
      estimatedEdgeAccuracy: 0.81,
      estimatedJointLoss: 3.4,
      cut: 0.3,
      shadowRate: 0.1,
      labelled: 400,
      driftScore: 7.2,
      driftThreshold: 3.1,
      drifting: true,
      driftWindow: 1000,
      outlierShare: 0.31,
    });
    await reconciler.reconcile('jointInferenceService', ns, name);
    const drifting = await read();
    expect(drifting.status?.conditions?.find((c) => c.type === 'DataDrift')).toMatchObject({
      status: 'True',
      reason: 'InputDrift',
      message: 'drift score 7.2 above threshold 3.1 over the last 1000 inputs (outlier share 0.31)',
    });
    expect(drifting.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
    });
    expect(drifting.status).toMatchObject({
      inferenceNumber: 200,
      shadowCount: 10,
      shadowRatio: 0.05,
      quality: { estimatedJointLoss: 3.4, drifting: true },
    });
    expect(await events()).toContain(
      'Warning DataDrift: drift score 7.2 above threshold 3.1 over the last 1000 inputs (outlier share 0.31)',
    );
    // Its own write seen, the reconciler has nothing more to do.
    expect((await reconciler.tick()).writes).toBe(0);

    await report({
      accuracyObjective: 2,
      estimatedEdgeAccuracy: 0.93,
      estimatedJointLoss: 1.1,
      driftScore: 1.4,
      driftThreshold: 3.1,
      drifting: false,
      driftWindow: 1000,
      outlierShare: 0.05,
    });
    await reconciler.tick();
    expect(await condition('DataDrift')).toMatchObject({
      status: 'False',
      reason: 'NoDrift',
      message: 'drift score 1.4 below threshold 3.1 over the last 1000 inputs (outlier share 0.05)',
    });
    expect(await condition('Ready')).toMatchObject({ status: 'True' });
    const cleared = await read();
    // The later report replaced the earlier one whole.
    expect(cleared.status?.quality).not.toHaveProperty('cut');
    expect(await events()).toContain(
      'Normal NoDrift: drift score 1.4 below threshold 3.1 over the last 1000 inputs (outlier share 0.05)',
    );
    expect((await reconciler.tick()).writes).toBe(0);
  });
});
