/**
 * The aggregator's evaluation of each new model on a thread of its own at a lower CPU priority
 * (niced-thread.ts). onnxruntime runs a session synchronously on the thread that calls it: on the
 * aggregator's own thread, measuring a model beside the next round held up that round's fan-out
 * (the model pushed to every trainer) and the updates arriving, for as long as the run took.
 *
 * The thread gets the evaluation set as it starts (a copy; the caller keeps its own, to start
 * another thread should this one die). Under the test runner this module is TypeScript, which a
 * bare thread cannot load: localEvaluation then evaluates on the caller's thread.
 */
import type { Split } from '../training/data.js';
import type { Logger } from '../telemetry/index.js';
import { evaluateOnnx, onnxEvaluator } from './evaluation.js';
import type { Evaluation } from './local-train.js';
import { nicedThread, serveCalls, startedFor } from './niced-thread.js';

/** Marks the thread this module starts. */
const role = 'edgeai-fl-evaluation';

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

interface Evaluator {
  readonly evaluate: (model: Uint8Array) => Promise<Evaluation>;
  readonly close: () => Promise<void>;
}

/** Evaluations on a thread at niceness `nice`, started now (and again after it died). */
function evaluationThread(options: { split: Split; nice: number; log: Logger }): Evaluator {
  const thread = nicedThread<Uint8Array, Evaluation>({
    moduleUrl: import.meta.url,
    role,
    nice: options.nice,
    data: options.split,
    name: 'evaluation thread',
    log: options.log,
    failure: (_code, message) => new Error(message),
  });
  thread.start();
  return { evaluate: (model) => thread.call(model), close: () => thread.close() };
}

/**
 * Where this process evaluates: a thread at niceness `nice` when this module is JavaScript (the
 * build, the image), else (the test runner's TypeScript) the caller's thread.
 */
function localEvaluation(options: { split: Split; nice: number; log: Logger }): Evaluator {
  if (import.meta.url.endsWith('.ts')) {
    return { evaluate: onnxEvaluator(options.split), close: () => Promise.resolve() };
  }
  return evaluationThread(options);
}

const started = startedFor(role);
if (started !== undefined) {
  const split = started.data as Split;
  serveCalls<Uint8Array, Evaluation>(
    started.nice,
    async (model) => ({ result: await evaluateOnnx(model, split) }),
    (err) => ({ code: 1, message: messageOf(err) }),
  );
}

export { evaluationThread, localEvaluation };
export type { Evaluator };
