/** The workers' environment: what reconcile-tick writes is what the worker config reads. */
import { describe, expect, it } from 'vitest';
import { desiredState } from '../../../shared/controller/desired.js';
import type { WorkerSettings } from '../../../shared/controller/knative-service.js';
import type { ServiceObject } from '../../../shared/controller/types.js';
import { loadEdgeConfig, loadServingConfig } from '../../../shared/inference/config.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import {
  edgeEnv,
  inferenceNodeOptions,
  runtimeEnv,
  servingEnv,
} from '../../../shared/messages/worker-env.js';
import { nodeTokenSecret } from '../../../shared/messages/worker-message.js';
import { secretName } from '../../../shared/status/index.js';

const settings: WorkerSettings = {
  image: 'edgeai:test',
  upstreamStatusUrl: 'http://upstream.example',
  workerSecret: undefined,
};
const model = (name: string): KubeObject => ({
  metadata: { name },
  spec: { url: `file:///m/${name}.onnx`, format: 'onnx' },
});
const service: ServiceObject = {
  metadata: { name: 'demo', namespace: 'ns', uid: 'u-1', generation: 1 },
  spec: {
    edgeWorker: {
      model: { name: 'small' },
      nodeName: 'edge0',
      hardExampleAlgorithm: { name: 'Margin', parameters: { margin: 0.3 } },
      task: { kind: 'classification' },
      offload: { mode: 'async', deadlineMs: 900, accuracyObjective: 2, shadowRate: 0.1 },
      workerSpec: { parameters: [{ key: 'nms_threshold', value: '0.4' }] },
    },
    cloudWorker: { model: { name: 'big' } },
  },
};

type Variable = {
  name: string;
  value?: string;
  valueFrom?: Record<string, Record<string, unknown>>;
};

function variables(worker: KubeObject): Variable[] {
  const spec = worker['spec'] as {
    template: { spec: { containers: Array<{ env: Variable[] }> } };
  };
  return spec.template.spec.containers[0]!.env;
}

/** The environment as the pod sees it: values, the node from the downward API, a token. */
function podEnv(env: readonly Variable[]): Record<string, string> {
  return Object.fromEntries(
    env.map((v) => [v.name, v.value ?? (v.name === 'EDGEAI_NODE' ? 'edge0' : 'a-token')]),
  );
}

describe('worker environment', () => {
  const desired = desiredState(
    service,
    new Map([
      ['small', model('small')],
      ['big', model('big')],
    ]),
    new Map([['edge0', { metadata: { name: 'edge0' } }]]),
    settings,
  );
  if (!desired.valid) throw new Error(desired.message);
  const known = new Set<string>([...servingEnv, ...edgeEnv, ...runtimeEnv]);

  it('writes only the contract names, and the edge worker every edge one', () => {
    const edge = variables(desired.workers.edge).map((v) => v.name);
    const cloud = variables(desired.workers.cloud).map((v) => v.name);
    expect([...edge, ...cloud].filter((name) => !known.has(name))).toEqual([]);
    expect(edgeEnv.filter((name) => !edge.includes(name))).toEqual([]);
    expect(cloud.filter((name) => (edgeEnv as readonly string[]).includes(name))).toEqual([
      'EDGEAI_SERVICE',
    ]);
  });

  it('is read back by the worker config as the spec says', () => {
    const edge = podEnv(variables(desired.workers.edge));
    expect(edge['NODE_OPTIONS']).toBe(inferenceNodeOptions);
    const serving = loadServingConfig('edge', edge);
    expect(serving.model.url).toBe('file:///m/small.onnx');
    expect(serving.modelName).toBe('small');
    expect(serving.task).toEqual({ kind: 'classification' });
    expect(serving.nmsThreshold).toBe(0.4);
    const config = loadEdgeConfig(edge);
    expect(config.hem).toEqual({ name: 'Margin', typedParameters: { margin: '0.3' } });
    expect(config.joint).toEqual({
      miningMode: 'inference-then-mining',
      offload: 'async',
      fallback: 'edge-result',
    });
    expect(config.cloud).toMatchObject({
      url: 'http://demo-cloud.ns.svc.cluster.local',
      model: 'big',
      deadlineMs: 900,
    });
    expect(config.quality).toMatchObject({ objective: 2, shadowRate: 0.1 });
    expect(config.report).toMatchObject({ namespace: 'ns', name: 'demo', node: 'edge0' });
    const cloud = podEnv(variables(desired.workers.cloud));
    expect(loadServingConfig('cloud', cloud).model.url).toBe('file:///m/big.onnx');
  });

  it("mounts the node's token from the Secret upstream-status reads", () => {
    const token = variables(desired.workers.edge).find((v) => v.name === 'EDGEAI_NODE_TOKEN');
    expect(token?.valueFrom?.['secretKeyRef']).toEqual({
      name: secretName('edge0'),
      key: nodeTokenSecret.key,
      optional: true,
    });
  });
});
