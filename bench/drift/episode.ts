/**
 * The drift episode of bench/drift, as a user would run it: a cloud worker and two edge replicas
 * (the esbuild bundle, as the container runs it) sharing one Redis, an accuracy objective of 1
 * point and the committed drift reference, fed over HTTP with clean digits, then shifted ones,
 * then clean again. Measured from outside: every answer's tier and correctness against the
 * labels, and each replica's own figures from `GET /skew` (what it reports upstream, from which
 * the JointInferenceService's DataDrift condition is set).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../local/index.js';
import { argmax } from '../../shared/inference/task.js';
import { classes, pixels } from '../../shared/training/data.js';
import type { Split } from '../../shared/training/data.js';

const root = new URL('../../../', import.meta.url);
const bundle = fileURLToPath(new URL('dist/bundle/serve.mjs', root));

interface Worker {
  base: string;
  child: ChildProcess;
}

async function startWorker(target: string, env: NodeJS.ProcessEnv): Promise<Worker> {
  const port = await freePort();
  const child = spawn(process.execPath, [bundle], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, ...env, FUNCTION_TARGET: target, PORT: String(port), LOG_LEVEL: 'warn' },
  });
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${target} exited with ${child.exitCode}`);
    const ready = await fetch(`${base}/v2/health/ready`).catch(() => undefined);
    if (ready?.ok === true) return { base, child };
    await sleep(20);
  }
}

async function stopWorker(worker: Worker): Promise<void> {
  if (worker.child.exitCode !== null) return;
  worker.child.kill('SIGINT');
  await once(worker.child, 'exit');
}

interface Phase {
  label: string;
  split: Split;
  /** Cloud-only correctness of each input (the model run in-process on the same inputs). */
  cloudRight: Uint8Array;
  requests: number;
}

interface EpisodePoint {
  request: number;
  phase: string;
  /** Over the last `every` requests. */
  offload: number;
  trueJointMinusCloud: number;
  /** Both replicas' estimates (points), and whether either says the inputs drift. */
  estimatedLoss: number[];
  drifting: boolean;
}

interface EpisodeResult {
  points: EpisodePoint[];
  /** Requests from the switch to shifted inputs until a replica reports drifting (-1: never). */
  detectionDelay: number;
  /** Requests from the return to clean inputs until no replica reports drifting (-1: never). */
  clearDelay: number;
  phases: Array<{ label: string; joint: number; cloud: number; offload: number; shadow: number }>;
}

/** One request of `rows` consecutive inputs of the phase's split, wrapping around. */
function body(split: Split, from: number, rows: number): string {
  const data = new Array<number>(rows * pixels);
  for (let r = 0; r < rows; r += 1) {
    const i = (from + r) % split.n;
    for (let p = 0; p < pixels; p += 1) data[r * pixels + p] = split.x[i * pixels + p]!;
  }
  return JSON.stringify({
    inputs: [{ name: 'input', shape: [rows, pixels], datatype: 'FP32', data }],
    outputs: [{ name: 'probabilities' }, { name: 'tier' }],
  });
}

interface Skew {
  drifting?: boolean;
  estimatedJointLoss?: number;
}

async function skew(edge: Worker): Promise<Skew> {
  const answer = await fetch(`${edge.base}/skew`);
  if (!answer.ok) throw new Error(`/skew answered ${answer.status}`);
  return (await answer.json()) as Skew;
}

async function shadowCount(edge: Worker): Promise<number> {
  const text = await (await fetch(`${edge.base}/metrics`)).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('edgeai_shadow_samples_total{') && l.includes('outcome="ok"'));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

async function runEpisode(options: {
  phases: Phase[];
  rows: number;
  concurrency: number;
  every: number;
  redisUrl: string;
}): Promise<EpisodeResult> {
  const cloud = await startWorker('cloud-infer', {
    MODEL_URL: new URL('models/cloud.onnx', root).href,
    MODEL_ROOT: fileURLToPath(new URL('models/', root)),
    MODEL_NAME: 'cloud',
  });
  const service = `bench/drift-${process.pid}-${Date.now()}`;
  const edges: Worker[] = [];
  try {
    for (let i = 0; i < 2; i += 1) {
      edges.push(
        await startWorker('edge-infer', {
          MODEL_URL: new URL('models/edge.onnx', root).href,
          MODEL_ROOT: fileURLToPath(new URL('models/', root)),
          MODEL_NAME: 'edge',
          HEM_NAME: 'Threshold',
          CLOUD_URL: cloud.base,
          REDIS_URL: options.redisUrl,
          EDGEAI_SERVICE: service,
          ACCURACY_OBJECTIVE: '1',
        }),
      );
    }
    return await drive(options, edges);
  } finally {
    await Promise.all([...edges, cloud].map(stopWorker));
  }
}

/** Sends every phase's requests, `concurrency` at a time, alternating replicas. */
async function drive(
  options: { phases: Phase[]; rows: number; concurrency: number; every: number },
  edges: Worker[],
): Promise<EpisodeResult> {
  const points: EpisodePoint[] = [];
  const phases: EpisodeResult['phases'] = [];
  let request = 0;
  let detectionDelay = -1;
  let clearDelay = -1;
  for (const [index, phase] of options.phases.entries()) {
    const start = request;
    const totals = { right: 0, cloud: 0, offloaded: 0, n: 0 };
    const shadowBefore = (await Promise.all(edges.map(shadowCount))).reduce((a, b) => a + b, 0);
    for (let done = 0; done < phase.requests; done += options.every) {
      const window = { right: 0, cloud: 0, offloaded: 0, n: 0 };
      const batch = Math.min(options.every, phase.requests - done);
      let next = 0;
      const sendOne = async (): Promise<void> => {
        for (let k = next++; k < batch; k = next++) {
          const from = ((done + k) * options.rows) % phase.split.n;
          const edge = edges[(request + k) % edges.length]!;
          const answer = await fetch(`${edge.base}/v2/models/edge/infer`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: body(phase.split, from, options.rows),
          });
          if (!answer.ok)
            throw new Error(`infer answered ${answer.status}: ${await answer.text()}`);
          const result = (await answer.json()) as {
            outputs: Array<{ name: string; data: Array<number | string> }>;
          };
          const probabilities = result.outputs.find((o) => o.name === 'probabilities')!.data;
          const tier = result.outputs.find((o) => o.name === 'tier')!.data;
          for (let r = 0; r < options.rows; r += 1) {
            const i = (from + r) % phase.split.n;
            const row = probabilities.slice(r * classes, (r + 1) * classes) as number[];
            window.right += Number(argmax(row) === phase.split.y[i]);
            window.cloud += phase.cloudRight[i]!;
            window.offloaded += Number(tier[r] === 'cloud');
            window.n += 1;
          }
        }
      };
      await Promise.all(Array.from({ length: options.concurrency }, sendOne));
      request += batch;
      const skews = await Promise.all(edges.map(skew));
      const drifting = skews.some((s) => s.drifting === true);
      if (index === 1 && detectionDelay < 0 && drifting) detectionDelay = request - start;
      if (index === 2 && clearDelay < 0 && !drifting) clearDelay = request - start;
      points.push({
        request,
        phase: phase.label,
        offload: window.offloaded / window.n,
        trueJointMinusCloud: (window.right - window.cloud) / window.n,
        estimatedLoss: skews.map((s) => s.estimatedJointLoss ?? Number.NaN),
        drifting,
      });
      totals.right += window.right;
      totals.cloud += window.cloud;
      totals.offloaded += window.offloaded;
      totals.n += window.n;
    }
    const shadowAfter = (await Promise.all(edges.map(shadowCount))).reduce((a, b) => a + b, 0);
    phases.push({
      label: phase.label,
      joint: totals.right / totals.n,
      cloud: totals.cloud / totals.n,
      offload: totals.offloaded / totals.n,
      shadow: (shadowAfter - shadowBefore) / totals.n,
    });
  }
  return { points, detectionDelay, clearDelay, phases };
}

export { runEpisode };
export type { EpisodeResult, EpisodePoint, Phase };
