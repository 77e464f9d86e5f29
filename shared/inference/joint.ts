/**
 * Joint inference at the edge. inference-then-mining (Sedna's CV mode): the edge model answers
 * every sample, the miner reads its output, hard samples go to the cloud. mining-then-inference
 * (Sedna's LLM mode): the miner decides from the input alone, so only Random, EdgeOnly and
 * CloudOnly fit it; easy samples run at the edge, hard ones only in the cloud. Offload is
 * synchronous (the cloud answers within the request, or the configured fallback applies) or
 * asynchronous (hard samples leave as hard-example events; the edge answers now).
 */
import { UnavailableError, ValidationError } from '../errors/index.js';
import type { Budget } from './budget.js';
import type { CloudClient } from './cloud-client.js';
import type { HardExampleMiner } from './hem.js';
import type { InferencePool } from './pool.js';
import type { SampleResult } from './protocol.js';

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
    input: Float32Array,
    rows: number,
    traceparent: string | undefined,
  ) => Promise<void>;
}

/** Refuses a configuration that cannot work, naming the setting. */
function checkJointSettings(settings: JointSettings, minerName: string, hasSink: boolean): void {
  if (settings.miningMode === 'mining-then-inference' && !inputMiners.has(minerName)) {
    throw new ValidationError(
      `MINING_MODE: mining-then-inference decides before the edge model runs, so it needs an input-only algorithm (Random, EdgeOnly, CloudOnly), not ${minerName}`,
    );
  }
  if (settings.offload === 'async' && !hasSink) {
    throw new ValidationError('OFFLOAD_MODE: async needs K_SINK (where hard-example events go)');
  }
}

/** `edge.infer` timed into `observe.edge`. */
async function runEdge(deps: JointDeps, input: Float32Array, rows: number): Promise<Float32Array> {
  const started = performance.now();
  const out = await deps.edge.infer(input, rows);
  deps.observe?.edge((performance.now() - started) / 1000);
  return out;
}

function rowsOf(input: Float32Array, width: number, indices: readonly number[]): Float32Array {
  const out = new Float32Array(indices.length * width);
  indices.forEach((row, i) => out.set(input.subarray(row * width, (row + 1) * width), i * width));
  return out;
}

/** Answers a batch; counts each sample and each hard sample exactly once. */
async function jointInfer(
  deps: JointDeps,
  input: Float32Array,
  rows: number,
  traceparent?: string,
): Promise<SampleResult[]> {
  const { edge, miner, settings, counters } = deps;
  const width = edge.inputWidth;
  const classes = edge.outputWidth;
  const results: SampleResult[] = [];
  let edgeOut: Float32Array | undefined;
  const hard: number[] = [];
  if (settings.miningMode === 'mining-then-inference') {
    // Input-only miners ignore the output they are shown; it only has to be well-formed.
    const blank = { kind: 'classification' as const, probabilities: [1] };
    const easy: number[] = [];
    for (let i = 0; i < rows; i += 1) (miner.isHard(blank) ? hard : easy).push(i);
    const easyOut =
      easy.length > 0 ? await runEdge(deps, rowsOf(input, width, easy), easy.length) : undefined;
    edgeOut = new Float32Array(rows * classes);
    easy.forEach((row, i) =>
      edgeOut!.set(easyOut!.subarray(i * classes, (i + 1) * classes), row * classes),
    );
  } else {
    edgeOut = await runEdge(deps, input, rows);
    for (let i = 0; i < rows; i += 1) {
      const output = {
        kind: 'classification' as const,
        probabilities: edgeOut.subarray(i * classes, (i + 1) * classes),
      };
      let isHard: boolean | undefined;
      if (deps.budget !== undefined) {
        const hardness = miner.hardness(output);
        deps.budget.observe(hardness);
        isHard = deps.budget.isHard(hardness);
      }
      if (isHard ?? miner.isHard(output)) hard.push(i);
    }
  }
  const hardSet = new Set(hard);
  for (let i = 0; i < rows; i += 1) {
    const own = edgeOut.subarray(i * classes, (i + 1) * classes);
    const ran = settings.miningMode === 'inference-then-mining' || !hardSet.has(i);
    results.push({
      probabilities: own,
      tier: 'edge',
      hard: hardSet.has(i),
      fallback: false,
      edge: ran ? own : undefined,
      cloud: undefined,
    });
  }
  counters.inferenceNumber += rows;
  counters.hardExampleNumber += hard.length;
  if (hard.length === 0) return results;

  const hardInput = rowsOf(input, width, hard);
  if (settings.offload === 'async' && deps.emitHardExamples !== undefined) {
    await deps.emitHardExamples(hardInput, hard.length, traceparent);
    counters.uploaded += hard.length;
    return results;
  }
  const started = performance.now();
  try {
    if (deps.cloud === undefined)
      throw new UnavailableError('no cloud worker configured (CLOUD_URL)');
    const cloudOut = await deps.cloud.infer(hardInput, hard.length, traceparent);
    deps.observe?.cloud((performance.now() - started) / 1000, true);
    counters.uploaded += hard.length;
    hard.forEach((row, i) => {
      const answer = cloudOut.subarray(i * classes, (i + 1) * classes);
      const result = results[row]!;
      result.cloud = answer;
      result.probabilities = answer;
      result.tier = 'cloud';
    });
  } catch (err) {
    deps.observe?.cloud((performance.now() - started) / 1000, false);
    if (!(err instanceof UnavailableError) || settings.fallback === 'error') throw err;
    const needEdge = hard.filter((row) => results[row]!.edge === undefined);
    if (needEdge.length > 0) {
      // mining-then-inference skipped the edge for these: run it now for the fallback.
      const out = await runEdge(deps, rowsOf(input, width, needEdge), needEdge.length);
      needEdge.forEach((row, i) => {
        const own = out.slice(i * classes, (i + 1) * classes);
        results[row]!.edge = own;
        results[row]!.probabilities = own;
      });
    }
    for (const row of hard) results[row]!.fallback = true;
    counters.fallbacks += hard.length;
  }
  return results;
}

export { jointInfer, checkJointSettings, WorkerCounters };
export type { JointDeps, JointSettings };
