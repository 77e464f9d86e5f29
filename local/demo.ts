/**
 * `make demo`: the seed's JointInferenceService (knative/samples/helmet-detection-demo.yaml,
 * applied unchanged: IBT, nms_threshold 0.6) on the embedded local stack, end to end. Its Models
 * point at the detection pair (models/detector-*.onnx); the control plane deploys the edge and
 * cloud workers as Knative Services (local processes), the edge worker detects digits on
 * held-out canvases and offloads the hard canvases to the cloud worker, the edge's reports come
 * back into the resource's status, a deleted worker comes back (self-healing), a spec update
 * rolls out, the aset-scheduler binds a stream, and deleting the resource removes its workers.
 * Then an ML graph (demo-graph.ts): a router that learns from rewards which model answers better.
 * Then federated learning (demo-federated.ts): the sample FederatedLearningJob's trainers on three
 * edge nodes, one killed mid-round, and its model rolled out to a JointInferenceService.
 */
import type { KubeObject } from '../shared/k8s/index.js';
import { detectCanvases } from './demo-detection.js';
import { federatedDemo } from './demo-federated.js';
import type { FederatedFigures } from './demo-federated.js';
import { graphDemo } from './demo-graph.js';
import type { GraphFigures } from './demo-graph.js';
import type { DetectionFigures } from './demo-detection.js';
import { readManifest, readiness, ready, startLocalStack, waitFor } from './stack.js';
import type { LocalStack, LocalStackOptions } from './stack.js';

interface DemoOptions extends Pick<LocalStackOptions, 'root' | 'bundle' | 'redisUrl'> {
  /** Held-out canvases sent to the edge worker. */
  images?: number;
  /** Held-out digits sent through the ML graph (1,000). */
  graphRequests?: number;
  say: (line: string) => void;
  /** Every process's and the Broker's lines, for `--verbose`. */
  trace?: (line: string) => void;
  /** Stops the demo and every process it started (Ctrl-C, SIGTERM, a test's timeout). */
  signal?: AbortSignal;
}

interface DemoResult extends DetectionFigures {
  miner: string;
  /** What upstream-status wrote into the resource from the edge's reports. */
  reported: { inferenceNumber: number; hardExampleNumber: number };
  /** The same canvases after a spec update raised IBT's thresholdImg (more goes to the cloud). */
  updated: DetectionFigures;
  /** The ML graph: the router's share of the cloud model before and after the rewards. */
  graph: GraphFigures;
  /** Federated learning: its rounds, the trainer killed, the model published and served. */
  federated: FederatedFigures;
  seconds: number;
}

const ns = 'default';
const jis = 'helmet-detection-demo';

const statusOf = (o: KubeObject | undefined) =>
  (o?.['status'] ?? {}) as {
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
    edgeWorkerState?: string;
    cloudWorkerState?: string;
    inferenceNumber?: number;
    hardExampleNumber?: number;
    uploadCount?: number;
  };

/** The `kubectl get jis` row. */
function row(o: KubeObject): string {
  const s = statusOf(o);
  const readyState = s.conditions?.find((c) => c.type === 'Ready')?.status ?? '';
  return [
    (o.metadata.name ?? '').padEnd(24),
    readyState.padEnd(7),
    (s.edgeWorkerState ?? '').padEnd(9),
    (s.cloudWorkerState ?? '').padEnd(9),
    String(s.uploadCount ?? 0),
  ].join(' ');
}

/** The sample's two Models: the edge and cloud detectors `npm run models` trains. */
async function prepare(stack: LocalStack, root: URL): Promise<void> {
  for (const [name, file] of [
    ['small-model', 'detector-edge.onnx'],
    ['big-model', 'detector-cloud.onnx'],
  ] as const) {
    await stack.kube.create('model', ns, {
      metadata: { name, namespace: ns },
      spec: { url: new URL(`models/${file}`, root).href, format: 'onnx' },
    });
  }
}

/** What each step needs: the stack, a way to say what happened, and the interruption signal. */
interface Step {
  stack: LocalStack;
  step: (line: string) => void;
  wait: { signal?: AbortSignal };
}

const jisRef = { kind: 'jointInferenceService' as const, namespace: ns, name: jis };
const edgeRef = { kind: 'knativeService' as const, namespace: ns, name: `${jis}-edge` };

/** Applies the seed's sample as written and waits until its workers are Ready. */
async function deploy({ stack, step, wait }: Step, root: URL): Promise<string> {
  const file = 'knative/samples/helmet-detection-demo.yaml';
  const sample = readManifest(new URL(file, root), file) as KubeObject & {
    spec: { edgeWorker: { hardExampleAlgorithm: { name: string } } };
  };
  await stack.kube.create('jointInferenceService', ns, sample);
  const miner = sample.spec.edgeWorker.hardExampleAlgorithm.name;
  step(`applied        JointInferenceService ${ns}/${jis} (${file}, unchanged: miner ${miner})`);
  let last = '';
  const get = () => stack.kube.get(jisRef);
  await waitFor(
    `${jis} to become Ready`,
    async () => {
      const current = await get();
      const line = row(current);
      if (line !== last) step(`jis            ${line}`);
      last = line;
      return ready(current) ? true : undefined;
    },
    { timeoutMs: 120_000, why: async () => readiness(await get()), ...wait },
  );
  return miner;
}

/** The held-out canvases through the workers, and one line per tier. */
async function traffic({ stack, step, wait }: Step, n: number, label: string) {
  const edgeUrl = await waitFor(
    'the edge worker route',
    () => stack.urlOf(ns, `${jis}-edge`),
    wait,
  );
  const cloudUrl = await waitFor(
    'the cloud worker route',
    () => stack.urlOf(ns, `${jis}-cloud`),
    wait,
  );
  const figures = await detectCanvases({
    edgeUrl,
    cloudUrl,
    edgeModel: 'small-model',
    cloudModel: 'big-model',
    n,
  });
  const { tiers, map } = figures;
  step(
    `${label.padEnd(15)}${figures.images} held-out canvases to the edge worker: ${tiers.edge.images} answered at the edge (${tiers.edge.detections} detections), ${tiers.cloud.images} by the cloud (${tiers.cloud.detections} detections), offload ${(100 * figures.offloadRatio).toFixed(1)}%`,
  );
  step(
    `${label.padEnd(15)}mAP@0.5: edge-only ${map.edge.toFixed(2)}, cloud-only ${map.cloud.toFixed(2)}, joint ${map.joint.toFixed(2)}`,
  );
  return figures;
}

/** Waits for the edge's counters to reach the status through upstream-status. */
async function reported({ stack, step, wait }: Step, n: number) {
  const counters = await waitFor(
    "the edge worker's counters in the status",
    async () => {
      const s = statusOf(await stack.kube.get(jisRef));
      return (s.inferenceNumber ?? 0) >= n
        ? { inferenceNumber: s.inferenceNumber ?? 0, hardExampleNumber: s.hardExampleNumber ?? 0 }
        : undefined;
    },
    { timeoutMs: 60_000, ...wait },
  );
  step(
    `status         inferenceNumber ${counters.inferenceNumber}, hardExampleNumber ${counters.hardExampleNumber} (reported by the edge, through upstream-status)`,
  );
  return counters;
}

/** Deletes the edge worker's Knative Service and waits for reconcile-tick to bring it back. */
async function selfHealing({ stack, step, wait }: Step): Promise<void> {
  const before = (await stack.kube.get(edgeRef)).metadata.uid;
  await stack.kube.delete(edgeRef);
  step(`self-healing   deleted Knative Service ${ns}/${jis}-edge`);
  await waitFor(
    'the edge worker to be recreated and ready',
    async () => {
      try {
        const again = await stack.kube.get(edgeRef);
        return again.metadata.uid !== before && ready(again) ? true : undefined;
      } catch {
        return undefined;
      }
    },
    { timeoutMs: 120_000, ...wait },
  );
  step(`self-healing   reconcile-tick recreated it; ready again`);
}

/** Raises IBT's thresholdImg in the spec and waits for the edge worker's rollout. */
async function update({ stack, step, wait }: Step): Promise<void> {
  const generation = (await stack.kube.get(edgeRef)).metadata.generation ?? 0;
  await stack.kube.patch(jisRef, {
    spec: {
      edgeWorker: { hardExampleAlgorithm: { name: 'IBT', parameters: { thresholdImg: 0.8 } } },
    },
  });
  step(`update         IBT thresholdImg 0.5 -> 0.8 (the resource's generation 2)`);
  await waitFor(
    'the edge worker to roll out the new spec',
    async () => {
      const current = await stack.kube.get(edgeRef);
      const observed = (current['status'] as { observedGeneration?: number } | undefined)
        ?.observedGeneration;
      const rolled = (current.metadata.generation ?? 0) > generation;
      return rolled && observed === current.metadata.generation && ready(current)
        ? true
        : undefined;
    },
    { timeoutMs: 120_000, ...wait },
  );
}

/** One stream bound by the aset-scheduler of the control plane. */
async function bindStream({ stack, step, wait }: Step): Promise<void> {
  const scheduler = await waitFor(
    'the aset-scheduler',
    () => stack.urlOf('edgeai-system', 'aset-scheduler'),
    wait,
  );
  const bound = await fetch(`${scheduler}/v1/streams`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      id: 'demo-camera-1',
      scheduler: 'ap-0',
      task: 'object-detection',
      maxDelayMs: 95,
      minAccuracy: 10,
      rate: 5,
      size: 0.6,
      durationS: 60,
    }),
  });
  const placement = (await bound.json()) as {
    worker?: { variant: string; cluster: string };
    policy?: string;
  };
  step(
    `aset           stream demo-camera-1 -> ${placement.worker?.variant ?? '?'} on ${placement.worker?.cluster ?? '?'} (policy ${placement.policy ?? '?'}, HTTP ${bound.status})`,
  );
}

/** Deletes the resource and waits for garbage collection to take its workers. */
async function cascade({ stack, step, wait }: Step): Promise<void> {
  await stack.kube.delete(jisRef);
  await waitFor(
    'the workers to be deleted with their service',
    async () => {
      const left = await stack.kube.list('knativeService', { namespace: ns });
      return left.items.length === 0 ? true : undefined;
    },
    wait,
  );
  step(`cascade        deleted ${jis}: its worker Services went with it`);
}

async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = Date.now();
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s`;
  const step = (line: string) => options.say(`${elapsed()}  ${line}`);
  const trace = options.trace;
  const wait = options.signal === undefined ? {} : { signal: options.signal };
  const stack = await startLocalStack({
    ...wait,
    root: options.root,
    bundle: options.bundle,
    ...(options.redisUrl === undefined ? {} : { redisUrl: options.redisUrl }),
    tickEveryMs: 5_000,
    env: { REPORT_INTERVAL_MS: '1000' },
    say: (line) => step(line),
    ...(trace === undefined
      ? {}
      : {
          onLog: (source, line) => trace(`[${source.namespace}/${source.revision}] ${line}`),
          onBrokerEvent: (_record, line) => trace(`[broker] ${line}`),
          onError: (err) => trace(`[stack] ${err instanceof Error ? err.message : String(err)}`),
        }),
  });
  // An interruption stops every process now; the waits then fail and `finally` closes again
  // (a no-op: closing happens once).
  const interrupt = () => void stack.close();
  options.signal?.addEventListener('abort', interrupt, { once: true });
  const at: Step = { stack, step, wait };
  try {
    await prepare(stack, options.root);
    const miner = await deploy(at, options.root);
    const n = options.images ?? 300;
    const figures = await traffic(at, n, 'inference');
    const counters = await reported(at, figures.images);
    await selfHealing(at);
    await update(at);
    const updated = await traffic(at, n, 'updated');
    await bindStream(at);
    await cascade(at);
    const graph = await graphDemo(at, options.root, options.graphRequests ?? 1_000);
    const federated = await federatedDemo(at, options.root);
    return {
      miner,
      ...figures,
      reported: counters,
      updated,
      graph,
      federated,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    options.signal?.removeEventListener('abort', interrupt);
    await stack.close();
  }
}

export { runDemo };
export type { DemoOptions, DemoResult };
