/**
 * `make demo`: the seed's JointInferenceService on the embedded local stack, end to end. The
 * control plane deploys its edge and cloud workers as Knative Services (local processes), the
 * edge worker answers test digits and offloads the hard ones to the cloud worker, the edge's
 * reports come back into the resource's status, a deleted worker comes back (self-healing), the
 * aset-scheduler binds a stream, and deleting the resource removes its workers (cascade).
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import type { KubeObject } from '../k8s/index.js';
import { loadMnist, pixels } from '../training/data.js';
import { readiness, ready, startLocalStack, waitFor } from './stack.js';
import type { LocalStack, LocalStackOptions } from './stack.js';

interface DemoOptions extends Pick<LocalStackOptions, 'root' | 'bundle' | 'redisUrl'> {
  /** Test digits sent to the edge worker. */
  digits?: number;
  say: (line: string) => void;
  /** Every process's and the Broker's lines, for `--verbose`. */
  trace?: (line: string) => void;
  /** Stops the demo and every process it started (Ctrl-C, SIGTERM, a test's timeout). */
  signal?: AbortSignal;
}

interface DemoResult {
  digits: number;
  accuracy: number;
  /** Answered by the cloud worker; `hard` were found hard (the rest fell back, if any). */
  offloaded: number;
  hard: number;
  /** What upstream-status wrote into the resource from the edge's reports. */
  reported: { inferenceNumber: number; hardExampleNumber: number };
  /** The same digits after the miner's threshold was raised by a spec update. */
  updated: { accuracy: number; offloaded: number; hard: number };
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

async function prepare(stack: LocalStack, root: URL): Promise<void> {
  const { kube } = stack;
  for (const node of ['edge0', 'solar-corona-cloud']) {
    await kube.create('node', undefined, {
      metadata: { name: node, labels: { 'kubernetes.io/hostname': node } },
    });
    // The edge worker signs its reports with its node's token; upstream-status checks it.
    const token = `${node}-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
    for (const namespace of [ns, 'edgeai-system']) {
      await kube.create('secret', namespace, {
        metadata: { name: `edgeai-node-${node}`, namespace },
        stringData: { token },
      });
    }
  }
  // reconcile-tick's WORKER_SECRET: what every worker gets as environment.
  await kube.create('secret', ns, {
    metadata: { name: 'edgeai-worker', namespace: ns },
    stringData: { REDIS_URL: stack.redisUrl },
  });
  for (const [name, file] of [
    ['small-model', 'edge.onnx'],
    ['big-model', 'cloud.onnx'],
  ] as const) {
    await kube.create('model', ns, {
      metadata: { name, namespace: ns },
      spec: { url: new URL(`models/${file}`, root).href, format: 'onnx' },
    });
  }
}

/** Sends the first `n` test digits to the edge worker, 50 a request. */
async function classify(
  edgeUrl: string,
  n: number,
): Promise<{ accuracy: number; offloaded: number; hard: number }> {
  const test = loadMnist().test;
  let correct = 0;
  let offloaded = 0;
  let hard = 0;
  for (let from = 0; from < n; from += 50) {
    const rows = Math.min(50, n - from);
    const instances = Array.from({ length: rows }, (_, i) =>
      Array.from(test.x.subarray((from + i) * pixels, (from + i + 1) * pixels)),
    );
    const answer = await fetch(`${edgeUrl}/predict`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ instances }),
    });
    if (!answer.ok)
      throw new Error(`edge worker answered ${answer.status}: ${await answer.text()}`);
    const { predictions } = (await answer.json()) as {
      predictions: Array<{ label: number; tier: string; hard: boolean }>;
    };
    predictions.forEach((p, i) => {
      if (p.label === test.y[from + i]) correct += 1;
      if (p.tier === 'cloud') offloaded += 1;
      if (p.hard) hard += 1;
    });
  }
  return { accuracy: correct / n, offloaded, hard };
}

async function runDemo(options: DemoOptions): Promise<DemoResult> {
  const started = Date.now();
  const { say } = options;
  const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(5)} s`;
  const step = (line: string) => say(`${elapsed()}  ${line}`);
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
  try {
    const { kube } = stack;
    await prepare(stack, options.root);
    const sample = parse(
      readFileSync(new URL('knative/samples/helmet-detection-demo.yaml', options.root), 'utf8'),
    ) as KubeObject & { spec: { edgeWorker: Record<string, unknown> } };
    // The seed's IBT miner reads object-detection boxes; our models classify digits, so the
    // edge finds its hard examples by confidence instead (the threshold npm run calibrate picks
    // for a 20% offload on the validation split).
    sample.spec.edgeWorker['hardExampleAlgorithm'] = {
      name: 'Threshold',
      parameters: { threshold: 0.936 },
    };
    await kube.create('jointInferenceService', ns, sample);
    step(
      `applied        JointInferenceService ${ns}/${jis} (knative/samples/helmet-detection-demo.yaml, miner Threshold 0.936 instead of IBT)`,
    );

    const get = () => kube.get({ kind: 'jointInferenceService', namespace: ns, name: jis });
    let last = '';
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

    const edgeUrl = await waitFor(
      'the edge worker route',
      () => stack.urlOf(ns, `${jis}-edge`),
      wait,
    );
    const n = Math.min(options.digits ?? 300, loadMnist().test.n);
    const { accuracy, offloaded, hard } = await classify(edgeUrl, n);
    step(
      `inference      ${n} test digits to the edge worker: ${(100 * accuracy).toFixed(2)}% correct, ${offloaded} hard ones answered by the cloud worker`,
    );

    const reported = await waitFor(
      "the edge worker's counters in the status",
      async () => {
        const s = statusOf(await get());
        return (s.inferenceNumber ?? 0) >= n
          ? { inferenceNumber: s.inferenceNumber ?? 0, hardExampleNumber: s.hardExampleNumber ?? 0 }
          : undefined;
      },
      { timeoutMs: 60_000, ...wait },
    );
    step(
      `status         inferenceNumber ${reported.inferenceNumber}, hardExampleNumber ${reported.hardExampleNumber} (reported by the edge, through upstream-status)`,
    );

    const worker = { kind: 'knativeService' as const, namespace: ns, name: `${jis}-edge` };
    const before = (await kube.get(worker)).metadata.uid;
    await kube.delete(worker);
    step(`self-healing   deleted Knative Service ${ns}/${jis}-edge`);
    await waitFor(
      'the edge worker to be recreated and ready',
      async () => {
        try {
          const again = await kube.get(worker);
          return again.metadata.uid !== before && ready(again) ? true : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 120_000, ...wait },
    );
    step(`self-healing   reconcile-tick recreated it; ready again`);

    const generation = (await kube.get(worker)).metadata.generation ?? 0;
    await kube.patch(
      { kind: 'jointInferenceService', namespace: ns, name: jis },
      {
        spec: {
          edgeWorker: {
            hardExampleAlgorithm: { name: 'Threshold', parameters: { threshold: 0.99 } },
          },
        },
      },
    );
    step(`update         miner threshold 0.936 -> 0.99 (the resource's generation 2)`);
    await waitFor(
      'the edge worker to roll out the new spec',
      async () => {
        const current = await kube.get(worker);
        const observed = (current['status'] as { observedGeneration?: number } | undefined)
          ?.observedGeneration;
        const rolled = (current.metadata.generation ?? 0) > generation;
        return rolled && observed === current.metadata.generation && ready(current)
          ? true
          : undefined;
      },
      { timeoutMs: 120_000, ...wait },
    );
    const updated = await classify(edgeUrl, n);
    step(
      `update         rolled out: ${(100 * updated.accuracy).toFixed(2)}% correct, ${updated.offloaded} of ${n} answered by the cloud worker`,
    );

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

    await kube.delete({ kind: 'jointInferenceService', namespace: ns, name: jis });
    await waitFor(
      'the workers to be deleted with their service',
      async () => {
        const left = await kube.list('knativeService', { namespace: ns });
        return left.items.length === 0 ? true : undefined;
      },
      wait,
    );
    step(`cascade        deleted ${jis}: its worker Services went with it`);
    return {
      digits: n,
      accuracy,
      offloaded,
      hard,
      reported,
      updated,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    options.signal?.removeEventListener('abort', interrupt);
    await stack.close();
  }
}

export { runDemo };
export type { DemoOptions, DemoResult };
