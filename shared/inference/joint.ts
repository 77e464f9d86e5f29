/**
 * Joint inference at the edge. inference-then-mining (Sedna's CV mode): the edge model answers
 * every sample, the miner reads the task view of its output, hard samples go to the cloud.
 * mining-then-inference (Sedna's LLM mode): the miner decides from the input alone, so only
 * Random, EdgeOnly and CloudOnly fit it; easy samples run at the edge, hard ones only in the
 * cloud. Offload is synchronous (the cloud answers within the request, or the configured fallback
 * applies) or asynchronous (hard samples leave as hard-example events; the edge answers now).
 * A sample is one row along the batch dimension, or the whole request for a model without one.
 */
import { ConfigError, UnavailableError } from '../errors/index.js';
import { lossAgainstCloud } from './agreement.js';
import type { Budget } from './budget.js';
import type { CloudClient } from './cloud-client.js';
import { checkFinite } from './finite.js';
import type { FiniteCheck } from './finite.js';
import type { HardExampleMiner } from './hem.js';
import { bandOf } from './objective.js';
import type { InferencePool, Tensors } from './pool.js';
import type { QualityWindow } from './quality-window.js';
import type { Shadow } from './shadow.js';
import { argmax } from './task.js';
import type { TaskAdapter, TaskResult } from './task.js';
import { pickRows } from './tensor.js';
import type { Tensor, TensorSpec } from './tensor.js';

const inputMiners = new Set(['Random', 'EdgeOnly', 'CloudOnly']);

interface JointSettings {
  miningMode: 'inference-then-mining' | 'mining-then-inference';
  offload: 'sync' | 'async';
  fallback: 'edge-result' | 'error';
}

/** Exact, cumulative counts of this worker process (reported upstream as they are). */
class WorkerCounters {
  inferenceNumber = 0;
  hardExampleNumber = 0;
  /** Hard samples that reached the cloud (answered, or handed to the event sink). */
  uploaded = 0;
  /** Samples answered by the edge result because the cloud failed. */
  fallbacks = 0;
  /** Edge-answered samples the cloud also answered (shadow sampling): a cost of its own. */
  shadowNumber = 0;
}

interface JointDeps {
  edge: InferencePool;
  /** What the edge model's outputs mean (and the cloud's task outputs). */
  task: TaskAdapter;
  /** Absent when no cloud is configured: hard samples get the fallback. */
  cloud: CloudClient | undefined;
  miner: HardExampleMiner;
  settings: JointSettings;
  counters: WorkerCounters;
  /** Offload-budget mode: the cut follows a target offload ratio (see budget.ts). */
  budget?: Budget;
  /**
   * The service's shared window: with an accuracy objective its cut decides (see objective.ts);
   * it also counts outliers for the drift test. Fed whether or not it decides.
   */
  quality?: QualityWindow;
  /** With an objective: shadow calls for a share of the samples the edge answers. */
  shadow?: Shadow;
  /** The drift reference's per-input outlier scores, and the score above which one is counted. */
  outliers?: {
    score(inputs: Readonly<Tensors>, rows: number): Float64Array;
    cut: number;
    /**
     * Share of requests scored for the drift test (whole requests, so no rows are copied):
     * the test reads a window of scored inputs, which a sample fills as well as all, for less.
     */
    sampleRate: number;
    /**
     * Rows scored of a sampled request, the first ones (a batched input is row-major, so no
     * copy): a large batch tells the window no more than its first rows, for a fraction of the cost.
     */
    sampleRows: number;
    random: () => number;
  };
  /** Timings of each model call, for the latency histograms. */
  observe?: { edge(seconds: number): void; cloud(seconds: number, ok: boolean): void };
  /** Async offload: hands hard samples to the event sink (resolves once accepted). */
  emitHardExamples?: (
    inputs: Readonly<Tensors>,
    rows: number,
    traceparent: string | undefined,
  ) => Promise<void>;
}

/** One sample's answer and who gave it. */
interface JointSample {
  result: TaskResult;
  tier: 'edge' | 'cloud';
  hard: boolean;
  /** The cloud failed and the edge result stands in for it. */
  fallback: boolean;
  /** The edge model's own answer (undefined when mining-then-inference skipped it). */
  edge: TaskResult | undefined;
  cloud: TaskResult | undefined;
  /** Against the drift reference, when there is one. */
  outlierScore?: number;
}

/** Refuses a configuration that cannot work, naming the setting. */
function checkJointSettings(
  settings: JointSettings,
  minerName: string,
  task: TaskAdapter,
  hasSink: boolean,
  hasObjective = false,
): void {
  if (hasObjective && (task.kind === 'raw' || settings.miningMode === 'mining-then-inference')) {
    throw new ConfigError(
      'ACCURACY_OBJECTIVE: the objective compares the edge answer with the cloud answer, which needs a classification or detection task and inference-then-mining',
    );
  }
  if (settings.miningMode === 'mining-then-inference' && !inputMiners.has(minerName)) {
    throw new ConfigError(
      `MINING_MODE: mining-then-inference decides before the edge model runs, so it needs an input-only algorithm (Random, EdgeOnly, CloudOnly), not ${minerName}`,
    );
  }
  if (task.kind === 'raw' && !inputMiners.has(minerName)) {
    throw new ConfigError(
      `HEM_NAME: ${minerName} reads class scores or boxes, but the task is raw (the model's outputs are neither); set TASK (kind classification or detection) or use Random, EdgeOnly or CloudOnly`,
    );
  }
  if (settings.offload === 'async' && settings.miningMode === 'mining-then-inference') {
    throw new ConfigError(
      'OFFLOAD_MODE: async offload answers every sample with the edge result, which mining-then-inference does not compute for hard samples; use sync, or inference-then-mining',
    );
  }
  if (settings.offload === 'async' && !hasSink) {
    throw new ConfigError('OFFLOAD_MODE: async needs K_SINK (where hard-example events go)');
  }
}

/** `edge.infer` timed into `observe.edge`. */
async function runEdge(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  rows: number,
  unchecked?: readonly FiniteCheck[],
): Promise<Tensors> {
  const started = performance.now();
  const out = await deps.edge.infer(inputs, rows, unchecked);
  deps.observe?.edge((performance.now() - started) / 1000);
  return out;
}

/**
 * The rows at `indices` of every input (the whole request for a model without a batch), always
 * copied: what leaves for the cloud may outlive the request (a shadow call is not awaited), and a
 * binary request's inputs are views of its body, whose memory serves the next request once the
 * answer is made (shared/http/body.ts).
 */
function subset(deps: JointDeps, inputs: Readonly<Tensors>, indices: readonly number[]): Tensors {
  const out: Tensors = {};
  for (const [name, tensor] of Object.entries(inputs)) {
    out[name] = deps.edge.signature.batched
      ? pickRows(tensor, indices)
      : { ...tensor, shape: [...tensor.shape], data: tensor.data.slice() };
  }
  return out;
}

/**
 * Which samples are hard, and the edge's answers (for the samples the edge ran). `unchecked`
 * inputs (finite.ts) are checked by the edge's thread when every sample runs there first, else
 * here before anything reads them.
 */
async function mine(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  rows: number,
  wantScores: boolean,
  unchecked: readonly FiniteCheck[],
): Promise<{
  hard: number[];
  edge: Array<TaskResult | undefined>;
  /** Each sample's hardness band, when a window or budget read it. */
  bands: number[];
  scores: Float64Array | undefined;
}> {
  const { miner, task } = deps;
  const hard: number[] = [];
  const edge = new Array<TaskResult | undefined>(rows).fill(undefined);
  const bands = new Array<number>(rows).fill(0);
  if (deps.settings.miningMode === 'mining-then-inference') {
    // Hard samples go to the cloud without running here: checked now, as the parser would have.
    checkFinite(inputs, unchecked);
    // Input-only miners ignore the output they are shown; it only has to be well-formed.
    const blank = { kind: 'classification' as const, probabilities: [1] };
    const easy: number[] = [];
    for (let i = 0; i < rows; i += 1) (miner.isHard(blank) ? hard : easy).push(i);
    if (easy.length > 0) {
      const out = await runEdge(deps, subset(deps, inputs, easy), easy.length);
      task.fromModel(out, easy.length).forEach((result, i) => (edge[easy[i]!] = result));
    }
    return { hard, edge, bands, scores: undefined };
  }
  const results = task.fromModel(await runEdge(deps, inputs, rows, unchecked), rows);
  const { outliers } = deps;
  let scores: Float64Array | undefined;
  if (outliers !== undefined && wantScores) scores = outliers.score(inputs, rows);
  else if (outliers !== undefined && outliers.random() < outliers.sampleRate) {
    // A model without a batch dimension has one sample per request: scored whole.
    const scoredRows = deps.edge.signature.batched ? Math.min(rows, outliers.sampleRows) : rows;
    scores = outliers.score(inputs, scoredRows);
  }
  results.forEach((result, i) => {
    edge[i] = result;
    const input = task.kind === 'raw' ? blankOutput : task.minerInput(result);
    let isHard: boolean | undefined;
    if (deps.quality !== undefined || deps.budget !== undefined) {
      const hardness = miner.hardness(input);
      bands[i] = bandOf(hardness);
      // Rows past a sample's first ones have no score: not counted by the drift test.
      const score = scores?.[i];
      deps.quality?.observe(bands[i], score === undefined ? undefined : score > outliers!.cut);
      isHard = deps.quality?.isHard(hardness);
      if (deps.budget !== undefined) {
        deps.budget.observe(hardness);
        isHard ??= deps.budget.isHard(hardness);
      }
    }
    if (isHard ?? miner.isHard(input)) hard.push(i);
  });
  return { hard, edge, bands, scores };
}

/** What an input-only miner is shown for a raw task's sample. */
const blankOutput = { kind: 'classification' as const, probabilities: [1] };

/** Answers a batch; counts each sample and each hard sample exactly once. */
async function jointInfer(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  rows: number,
  traceparent?: string,
  /** Score every sample against the drift reference (the caller asked for outlier_score). */
  wantScores = false,
  /** Inputs not yet checked for finiteness (finite.ts): the edge's thread checks them. */
  unchecked: readonly FiniteCheck[] = [],
): Promise<JointSample[]> {
  const { settings, counters, task } = deps;
  const { hard, edge, bands, scores } = await mine(deps, inputs, rows, wantScores, unchecked);
  const hardSet = new Set(hard);
  const samples: JointSample[] = edge.map((own, i) => ({
    // A mining-then-inference hard sample has no edge answer yet: the cloud's (or the fallback's)
    // replaces this placeholder below.
    result: own ?? { kind: 'raw', tensors: {} },
    tier: 'edge',
    hard: hardSet.has(i),
    fallback: false,
    edge: own,
    cloud: undefined,
    ...(scores?.[i] === undefined ? {} : { outlierScore: scores[i] }),
  }));
  counters.inferenceNumber += rows;
  counters.hardExampleNumber += hard.length;
  shadowEasy(deps, inputs, samples, bands, traceparent);
  if (hard.length === 0) return samples;

  const hardInputs = subset(deps, inputs, hard);
  if (settings.offload === 'async' && deps.emitHardExamples !== undefined) {
    await deps.emitHardExamples(hardInputs, hard.length, traceparent);
    counters.uploaded += hard.length;
    return samples;
  }
  const started = performance.now();
  try {
    if (deps.cloud === undefined)
      throw new UnavailableError('no cloud worker configured (CLOUD_URL)');
    const names = task.outputs.map((o) => o.name);
    const answer = await deps.cloud.infer(hardInputs, names, traceparent);
    const cloud = task.fromTask(answer, hard.length);
    deps.observe?.cloud((performance.now() - started) / 1000, true);
    counters.uploaded += hard.length;
    hard.forEach((row, i) => {
      const sample = samples[row]!;
      sample.cloud = cloud[i];
      sample.result = cloud[i]!;
      sample.tier = 'cloud';
    });
    // Offloaded samples pair both answers for free: the evidence above the cut.
    labelPairs(deps, hard, samples, bands);
  } catch (err) {
    deps.observe?.cloud((performance.now() - started) / 1000, false);
    if (!(err instanceof UnavailableError) || settings.fallback === 'error') throw err;
    await fallBack(deps, inputs, samples, hard);
  }
  return samples;
}

/** Counts, for the objective, what the edge's answer lost against the cloud's on each of `rows`. */
function labelPairs(
  deps: JointDeps,
  rows: readonly number[],
  samples: readonly JointSample[],
  bands: readonly number[],
): void {
  if (deps.quality === undefined) return;
  const trustCloud = deps.quality.state().drift?.drifting !== true;
  for (const row of rows) {
    const { edge, cloud } = samples[row]!;
    if (edge === undefined || cloud === undefined) continue;
    const loss = lossAgainstCloud(edge, cloud, trustCloud);
    if (loss !== undefined) deps.quality.label(bands[row]!, loss);
  }
}

/**
 * The evidence below the cut: a drawn share of the samples the edge answered goes to the cloud in
 * the background. Not awaited, so the answer never waits for it; a failure costs only evidence.
 */
function shadowEasy(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  samples: JointSample[],
  bands: readonly number[],
  traceparent: string | undefined,
): void {
  const { shadow, cloud, task } = deps;
  if (shadow === undefined || cloud === undefined || deps.quality === undefined) return;
  const easy: number[] = [];
  samples.forEach((s, i) => {
    if (!s.hard && s.edge !== undefined) easy.push(i);
  });
  const rows = shadow.draw(easy);
  if (rows.length === 0) return;
  const shadowInputs = subset(deps, inputs, rows);
  shadow.start(rows.length, async () => {
    const answer = await cloud.infer(
      shadowInputs,
      task.outputs.map((o) => o.name),
      traceparent,
    );
    const answers = task.fromTask(answer, rows.length);
    deps.counters.shadowNumber += rows.length;
    // Pairs built on copies: the samples themselves already left with the answer.
    const pairs = rows.map((row, i) => ({ ...samples[row]!, cloud: answers[i] }));
    labelPairs(
      deps,
      pairs.map((_, i) => i),
      pairs,
      rows.map((row) => bands[row]!),
    );
  });
}

/** The cloud failed: hard samples keep (or now get) the edge's answer, marked as a fallback. */
async function fallBack(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  samples: JointSample[],
  hard: readonly number[],
): Promise<void> {
  const missing = hard.filter((row) => samples[row]!.edge === undefined);
  if (missing.length > 0) {
    // mining-then-inference skipped the edge for these: run it now for the fallback.
    const out = await runEdge(deps, subset(deps, inputs, missing), missing.length);
    deps.task.fromModel(out, missing.length).forEach((result, i) => {
      const sample = samples[missing[i]!]!;
      sample.edge = result;
      sample.result = result;
    });
  }
  for (const row of hard) samples[row]!.fallback = true;
  deps.counters.fallbacks += hard.length;
}

/**
 * The outputs an edge worker answers with: the task's, who answered, the edge's own, and with a
 * drift reference `outlier_score` (only when a request asks for it by name: scoring costs).
 */
function jointOutputs(task: TaskAdapter, outlierScores = false): TensorSpec[] {
  const perSample = (name: string, datatype: TensorSpec['datatype']): TensorSpec => ({
    name,
    datatype,
    shape: [-1],
  });
  const own: TensorSpec[] = [];
  if (task.kind === 'classification') {
    own.push(perSample('edge_label', 'INT32'), perSample('cloud_label', 'INT32'));
  } else if (task.kind === 'detection') {
    own.push(
      { name: 'edge_detections', datatype: 'FP32', shape: [-1, -1, 6] },
      perSample('edge_num_detections', 'INT32'),
    );
  }
  return [
    ...task.outputs,
    perSample('tier', 'BYTES'),
    perSample('hard', 'BOOL'),
    perSample('fallback', 'BOOL'),
    ...own,
    ...(outlierScores ? [perSample('outlier_score', 'FP32')] : []),
  ];
}

/**
 * One number per sample, written into `out`. A loop, not `Int32Array.from(samples, pick)`: the
 * typed arrays' `from` with a map function takes ~4.5 us for 64 samples in V8 (30x this loop),
 * and an answer builds several of these per request.
 */
function fromSamples<T extends Uint8Array | Int32Array | Float32Array>(
  out: T,
  samples: readonly JointSample[],
  pick: (sample: JointSample, i: number) => number,
): T {
  for (let i = 0; i < samples.length; i += 1) out[i] = pick(samples[i]!, i);
  return out;
}

/** The tensors of `jointOutputs` for answered samples. */
function jointTensors(task: TaskAdapter, samples: readonly JointSample[]): Record<string, Tensor> {
  const n = samples.length;
  const flags = (pick: (s: JointSample) => boolean) =>
    fromSamples(new Uint8Array(n), samples, (s) => (pick(s) ? 1 : 0));
  const out: Record<string, Tensor> = {
    ...task.toTensors(samples.map((s) => s.result)),
    tier: { datatype: 'BYTES', shape: [n], data: samples.map((s) => s.tier) },
    hard: { datatype: 'BOOL', shape: [n], data: flags((s) => s.hard) },
    fallback: { datatype: 'BOOL', shape: [n], data: flags((s) => s.fallback) },
  };
  if (n > 0 && samples.every((s) => s.outlierScore !== undefined)) {
    out['outlier_score'] = {
      datatype: 'FP32',
      shape: [n],
      data: fromSamples(new Float32Array(n), samples, (s) => s.outlierScore!),
    };
  }
  const labelOf = (r: TaskResult | undefined) =>
    r?.kind === 'classification' ? argmax(r.probabilities) : -1;
  if (task.kind === 'classification') {
    out['edge_label'] = {
      datatype: 'INT32',
      shape: [n],
      data: fromSamples(new Int32Array(n), samples, (s) => labelOf(s.edge)),
    };
    out['cloud_label'] = {
      datatype: 'INT32',
      shape: [n],
      data: fromSamples(new Int32Array(n), samples, (s) => labelOf(s.cloud)),
    };
  } else if (task.kind === 'detection') {
    const edge = task.toTensors(
      samples.map((s) => s.edge ?? { kind: 'detection', detections: [] }),
    );
    const counts = edge['num_detections']!.data as Int32Array;
    out['edge_detections'] = edge['detections']!;
    out['edge_num_detections'] = {
      datatype: 'INT32',
      shape: [n],
      data: fromSamples(new Int32Array(n), samples, (s, i) =>
        s.edge === undefined ? -1 : counts[i]!,
      ),
    };
  }
  return out;
}

export { jointInfer, checkJointSettings, jointOutputs, jointTensors, WorkerCounters };
export type { JointDeps, JointSettings, JointSample };
