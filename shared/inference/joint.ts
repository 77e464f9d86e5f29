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
import type { Budget } from './budget.js';
import type { CloudClient } from './cloud-client.js';
import type { HardExampleMiner } from './hem.js';
import type { InferencePool, Tensors } from './pool.js';
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
}

/** Refuses a configuration that cannot work, naming the setting. */
function checkJointSettings(
  settings: JointSettings,
  minerName: string,
  task: TaskAdapter,
  hasSink: boolean,
): void {
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
async function runEdge(deps: JointDeps, inputs: Readonly<Tensors>, rows: number): Promise<Tensors> {
  const started = performance.now();
  const out = await deps.edge.infer(inputs, rows);
  deps.observe?.edge((performance.now() - started) / 1000);
  return out;
}

/** The rows at `indices` of every input (the whole request for a model without a batch). */
function subset(deps: JointDeps, inputs: Readonly<Tensors>, indices: readonly number[]): Tensors {
  if (!deps.edge.signature.batched) return { ...inputs };
  const out: Tensors = {};
  for (const [name, tensor] of Object.entries(inputs)) out[name] = pickRows(tensor, indices);
  return out;
}

/** Which samples are hard, and the edge's answers (for the samples the edge ran). */
async function mine(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  rows: number,
): Promise<{ hard: number[]; edge: Array<TaskResult | undefined> }> {
  const { miner, task } = deps;
  const hard: number[] = [];
  const edge = new Array<TaskResult | undefined>(rows).fill(undefined);
  if (deps.settings.miningMode === 'mining-then-inference') {
    // Input-only miners ignore the output they are shown; it only has to be well-formed.
    const blank = { kind: 'classification' as const, probabilities: [1] };
    const easy: number[] = [];
    for (let i = 0; i < rows; i += 1) (miner.isHard(blank) ? hard : easy).push(i);
    if (easy.length > 0) {
      const out = await runEdge(deps, subset(deps, inputs, easy), easy.length);
      task.fromModel(out, easy.length).forEach((result, i) => (edge[easy[i]!] = result));
    }
    return { hard, edge };
  }
  const results = task.fromModel(await runEdge(deps, inputs, rows), rows);
  results.forEach((result, i) => {
    edge[i] = result;
    let isHard: boolean | undefined;
    if (deps.budget !== undefined) {
      const hardness = miner.hardness(task.minerInput(result));
      deps.budget.observe(hardness);
      isHard = deps.budget.isHard(hardness);
    }
    if (isHard ?? miner.isHard(task.kind === 'raw' ? blankOutput : task.minerInput(result)))
      hard.push(i);
  });
  return { hard, edge };
}

/** What an input-only miner is shown for a raw task's sample. */
const blankOutput = { kind: 'classification' as const, probabilities: [1] };

/** Answers a batch; counts each sample and each hard sample exactly once. */
async function jointInfer(
  deps: JointDeps,
  inputs: Readonly<Tensors>,
  rows: number,
  traceparent?: string,
): Promise<JointSample[]> {
  const { settings, counters, task } = deps;
  const { hard, edge } = await mine(deps, inputs, rows);
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
  }));
  counters.inferenceNumber += rows;
  counters.hardExampleNumber += hard.length;
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
  } catch (err) {
    deps.observe?.cloud((performance.now() - started) / 1000, false);
    if (!(err instanceof UnavailableError) || settings.fallback === 'error') throw err;
    await fallBack(deps, inputs, samples, hard);
  }
  return samples;
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

/** The outputs an edge worker answers with: the task's, who answered, and the edge's own. */
function jointOutputs(task: TaskAdapter): TensorSpec[] {
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
  ];
}

/** The tensors of `jointOutputs` for answered samples. */
function jointTensors(task: TaskAdapter, samples: readonly JointSample[]): Record<string, Tensor> {
  const n = samples.length;
  const flags = (pick: (s: JointSample) => boolean) =>
    Uint8Array.from(samples, (s) => (pick(s) ? 1 : 0));
  const out: Record<string, Tensor> = {
    ...task.toTensors(samples.map((s) => s.result)),
    tier: { datatype: 'BYTES', shape: [n], data: samples.map((s) => s.tier) },
    hard: { datatype: 'BOOL', shape: [n], data: flags((s) => s.hard) },
    fallback: { datatype: 'BOOL', shape: [n], data: flags((s) => s.fallback) },
  };
  const labelOf = (r: TaskResult | undefined) =>
    r?.kind === 'classification' ? argmax(r.probabilities) : -1;
  if (task.kind === 'classification') {
    out['edge_label'] = {
      datatype: 'INT32',
      shape: [n],
      data: Int32Array.from(samples, (s) => labelOf(s.edge)),
    };
    out['cloud_label'] = {
      datatype: 'INT32',
      shape: [n],
      data: Int32Array.from(samples, (s) => labelOf(s.cloud)),
    };
  } else if (task.kind === 'detection') {
    const edge = task.toTensors(
      samples.map((s) => s.edge ?? { kind: 'detection', detections: [] }),
    );
    out['edge_detections'] = edge['detections']!;
    out['edge_num_detections'] = {
      datatype: 'INT32',
      shape: [n],
      data: Int32Array.from(samples, (s, i) =>
        s.edge === undefined ? -1 : (edge['num_detections']!.data as Int32Array)[i]!,
      ),
    };
  }
  return out;
}

export { jointInfer, checkJointSettings, jointOutputs, jointTensors, WorkerCounters };
export type { JointDeps, JointSettings, JointSample };
