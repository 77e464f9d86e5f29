/**
 * The per-condition half of bench/drift: the held-out digits clean and under every perturbation
 * of the suite, each answered by the serving path's own joint inference (jointInfer with the
 * quality window, shadow sampling and outlier scores) over precomputed model outputs, so that
 * ~25 conditions of 10,000 inputs take seconds. The models run once per condition with
 * onnxruntime; what is simulated is only the transport (no HTTP here: the episode does that).
 */
import { readFileSync } from 'node:fs';
import { pino } from 'pino';
import { loadEdgeConfig } from '../../shared/inference/config.js';
import { outcomes, pick, score, sweep } from '../../shared/inference/calibrate.js';
import { createMiner } from '../../shared/inference/hem.js';
import type { HardExampleMiner } from '../../shared/inference/hem.js';
import { jointInfer, WorkerCounters } from '../../shared/inference/joint.js';
import type { JointDeps } from '../../shared/inference/joint.js';
import { loadOnnxModel } from '../../shared/inference/onnx-runtime.js';
import { createOutlierScorer, parseDriftReference } from '../../shared/inference/outlier.js';
import type { OutlierScorer } from '../../shared/inference/outlier.js';
import type { InferencePool, Tensors } from '../../shared/inference/pool.js';
import { createQualityWindow } from '../../shared/inference/quality-window.js';
import type { QualityWindow } from '../../shared/inference/quality-window.js';
import { createShadow } from '../../shared/inference/shadow.js';
import { argmax, createTaskAdapter } from '../../shared/inference/task.js';
import type { TaskAdapter } from '../../shared/inference/task.js';
import type { Signature } from '../../shared/inference/tensor.js';
import { classes, pixels } from '../../shared/training/data.js';
import type { Split } from '../../shared/training/data.js';
import { seededRandom } from '../../shared/random/index.js';

const root = new URL('../../../', import.meta.url);

/** A condition's inputs with both models' answers and the outlier scores, computed once. */
interface Scored {
  n: number;
  x: Float32Array;
  y: Uint8Array;
  edge: Float32Array;
  cloud: Float32Array;
}

interface Models {
  edge: (x: Float32Array, n: number) => Promise<Float32Array>;
  cloud: (x: Float32Array, n: number) => Promise<Float32Array>;
  scorer: OutlierScorer;
  close(): Promise<void>;
}

async function loadModels(): Promise<Models> {
  const open = async (name: string) =>
    loadOnnxModel(new Uint8Array(readFileSync(new URL(`models/${name}.onnx`, root))));
  const edge = await open('edge');
  const cloud = await open('cloud');
  const reference = parseDriftReference(
    JSON.parse(readFileSync(new URL('models/edge.drift.json', root), 'utf8')),
  );
  const scorer = createOutlierScorer(reference, {
    name: reference.input,
    datatype: 'FP32',
    shape: [-1, pixels],
  });
  return {
    edge: (x, n) => edge.run(x, n),
    cloud: (x, n) => cloud.run(x, n),
    scorer,
    close: async () => {
      await edge.close();
      await cloud.close();
    },
  };
}

async function scoreSplit(models: Models, split: Split): Promise<Scored> {
  return {
    n: split.n,
    x: split.x,
    y: split.y,
    edge: await models.edge(split.x, split.n),
    cloud: await models.cloud(split.x, split.n),
  };
}

const accuracy = (out: Float32Array, y: Uint8Array, n: number) => {
  let right = 0;
  for (let i = 0; i < n; i += 1) {
    if (argmax(out.subarray(i * classes, (i + 1) * classes)) === y[i]) right += 1;
  }
  return right / n;
};

/**
 * What an operator does without this issue: `npm run calibrate -- --target-accuracy`, the
 * Threshold parameter with the least offload whose joint accuracy on clean labelled validation
 * data is within the objective of the cloud's (shared/inference/calibrate.ts).
 */
function staticThreshold(validation: Scored, objective: number): number {
  const o = outcomes(validation.y, validation.edge, validation.cloud, classes);
  const target = o.cloudCorrect / o.n - objective;
  const point = pick(sweep('Threshold', 'threshold', o), o.n, { minAccuracy: target });
  if (point === undefined) throw new Error(`no Threshold parameter reaches ${target}`);
  return point.parameter;
}

/** Joint accuracy and offload of the Threshold miner at a fixed parameter. */
function staticRun(s: Scored, threshold: number) {
  const { correct, hard } = score(
    createMiner('Threshold', { threshold }),
    outcomes(s.y, s.edge, s.cloud, classes),
  );
  return { joint: correct / s.n, offload: hard / s.n };
}

const signature: Signature = {
  inputs: [
    { name: 'input', datatype: 'FP32', shape: [-1, pixels] },
    { name: 'index', datatype: 'INT32', shape: [-1] },
  ],
  outputs: [{ name: 'probabilities', datatype: 'FP32', shape: [-1, classes] }],
  batched: true,
};

/** The rows of a precomputed [n, classes] output that `inputs.index` names. */
function rowsOf(out: Float32Array, inputs: Readonly<Tensors>): Tensors {
  const index = inputs['index']!.data as Int32Array;
  const data = new Float32Array(index.length * classes);
  index.forEach((i, r) => data.set(out.subarray(i * classes, (i + 1) * classes), r * classes));
  return { probabilities: { datatype: 'FP32', shape: [index.length, classes], data } };
}

interface StreamSettings {
  objective: number;
  shadowRate: number;
  requestRows: number;
  /** Samples between window refreshes (a replica refreshes on a timer; here, by traffic). */
  refreshEvery: number;
  seed: number;
}

/** A joint path replayed over outputs computed beforehand, for both tiers. */
interface Replay {
  signature: Signature;
  task: TaskAdapter;
  /** The edge's and the cloud's model outputs for a request's rows. */
  edge(inputs: Readonly<Tensors>): Tensors;
  cloud(inputs: Readonly<Tensors>): Tensors;
  /** A model output whose first dimension is the request's rows. */
  rowsFrom: string;
  /** The input the drift detector scores. */
  scored: string;
  scorer: OutlierScorer;
  miner: HardExampleMiner;
  window: QualityWindow;
  shadowRate: number;
  /** Seeds the shadow sampling; `seed + 1` the outlier sampling. */
  seed: number;
}

/** The joint path over precomputed outputs: a fake pool and cloud, everything else real. */
function replayDeps(replay: Replay): JointDeps {
  const { task } = replay;
  // Scored as a worker scores with its defaults: a sample of requests, their first rows.
  const drift = loadEdgeConfig({}).quality;
  const pool: InferencePool = {
    signature: replay.signature,
    infer: (inputs) => Promise.resolve(replay.edge(inputs)),
    queuedRows: () => 0,
    close: () => Promise.resolve(),
  };
  return {
    edge: pool,
    task,
    cloud: {
      infer: (inputs) => {
        const out = replay.cloud(inputs);
        return Promise.resolve(
          task.toTensors(task.fromModel(out, out[replay.rowsFrom]!.shape[0]!)),
        );
      },
      breakerState: () => 'closed',
    },
    miner: replay.miner,
    settings: { miningMode: 'inference-then-mining', offload: 'sync', fallback: 'edge-result' },
    counters: new WorkerCounters(),
    quality: replay.window,
    shadow: createShadow({
      rate: replay.shadowRate,
      maxInFlight: 64,
      random: seededRandom(replay.seed),
    }),
    outliers: {
      score: (inputs, rows) => replay.scorer.score(inputs[replay.scored]!, rows),
      cut: replay.scorer.reference.quantiles.p95,
      sampleRate: drift.driftSampleRate,
      sampleRows: drift.driftSampleRows,
      random: seededRandom(replay.seed + 1),
    },
  };
}

/** The classifier pair's joint path, the Threshold miner at the objective's cut. */
function jointDeps(
  current: { s: Scored },
  window: QualityWindow,
  scorer: OutlierScorer,
  settings: StreamSettings,
): JointDeps {
  return replayDeps({
    signature,
    task: createTaskAdapter({ kind: 'classification' }, signature, undefined),
    edge: (inputs) => rowsOf(current.s.edge, inputs),
    cloud: (inputs) => rowsOf(current.s.cloud, inputs),
    rowsFrom: 'probabilities',
    scored: 'input',
    scorer,
    miner: createMiner('Threshold', {}),
    window,
    shadowRate: settings.shadowRate,
    seed: settings.seed,
  });
}

interface StreamPoint {
  /** Samples answered so far in this stream. */
  at: number;
  offload: number;
  trueJoint: number;
  cloud: number;
  estimatedLoss: number;
  drifting: boolean;
  driftScore: number;
}

/** Streams `s` (in a seeded order) through `deps`; counts what the joint answers got right. */
async function stream(
  deps: JointDeps,
  current: { s: Scored },
  s: Scored,
  settings: StreamSettings,
  onPoint?: (p: StreamPoint) => void,
) {
  current.s = s;
  const order = Array.from({ length: s.n }, (_, i) => i);
  const random = seededRandom(settings.seed);
  for (let i = order.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const before = { ...deps.counters };
  let right = 0;
  let cloudRight = 0;
  let sinceRefresh = 0;
  for (let from = 0; from < s.n; from += settings.requestRows) {
    const rows = order.slice(from, from + settings.requestRows);
    const x = new Float32Array(rows.length * pixels);
    rows.forEach((i, r) => x.set(s.x.subarray(i * pixels, (i + 1) * pixels), r * pixels));
    const samples = await jointInfer(
      deps,
      {
        input: { datatype: 'FP32', shape: [rows.length, pixels], data: x },
        index: { datatype: 'INT32', shape: [rows.length], data: Int32Array.from(rows) },
      },
      rows.length,
    );
    await deps.shadow?.idle();
    samples.forEach((sample, r) => {
      const i = rows[r]!;
      if (sample.result.kind === 'classification' && argmax(sample.result.probabilities) === s.y[i])
        right += 1;
      if (argmax(s.cloud.subarray(i * classes, (i + 1) * classes)) === s.y[i]) cloudRight += 1;
    });
    sinceRefresh += rows.length;
    if (sinceRefresh >= settings.refreshEvery) {
      sinceRefresh = 0;
      await deps.quality!.refresh();
      const state = deps.quality!.state();
      const done = Math.min(s.n, from + settings.requestRows);
      onPoint?.({
        at: done,
        offload: (deps.counters.hardExampleNumber - before.hardExampleNumber) / done,
        trueJoint: right / done,
        cloud: cloudRight / done,
        estimatedLoss: state.estimate?.loss ?? Number.NaN,
        drifting: state.drift?.drifting ?? false,
        driftScore: state.drift?.score ?? 0,
      });
    }
  }
  const n = s.n;
  return {
    joint: right / n,
    offload: (deps.counters.hardExampleNumber - before.hardExampleNumber) / n,
    shadow: (deps.counters.shadowNumber - before.shadowNumber) / n,
  };
}

function newWindow(settings: StreamSettings): QualityWindow {
  return createQualityWindow(benchWindowOptions('bench/drift', settings.objective));
}

/** The worker's own defaults (an edge worker with only ACCURACY_OBJECTIVE set), refreshed by the bench. */
function benchWindowOptions(service: string, objective: number) {
  const q = loadEdgeConfig({ ACCURACY_OBJECTIVE: String(100 * objective) }).quality;
  return {
    redis: undefined,
    service,
    reporter: 'bench',
    bucketSize: q.bucketSize,
    buckets: q.buckets,
    driftWindow: q.driftWindow,
    refreshMs: 0,
    calibration: { objective, z: q.z, minLabelled: q.minLabelled },
    drift: { expectedShare: 0.05, raiseAt: q.raiseAt, clearAt: q.clearAt, minInputs: 100 },
    log: pino({ level: 'silent' }),
  };
}

export {
  loadModels,
  scoreSplit,
  staticThreshold,
  staticRun,
  stream,
  jointDeps,
  newWindow,
  accuracy,
  benchWindowOptions,
  replayDeps,
};
export type { Scored, Models, StreamSettings, StreamPoint };
