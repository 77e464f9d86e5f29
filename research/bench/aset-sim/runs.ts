/**
 * Where the bench keeps its runs: one promise per (condition, runner, seed), whichever thread ran
 * it, and the helpers that turn a run into percentages.
 */
import type { Outcomes } from '../../../shared/aset/window.js';
import type { JobResult, Runner } from './jobs.js';

/** The deployed meta-policy, and the network itself when a static policy was deployed instead. */
type AsetRunner = 'aset' | 'aset-network';
type AnyRunner = Runner | AsetRunner;

const runnerKey = (runner: AnyRunner): string => {
  if (runner === 'aset' || runner === 'aset-network') return runner;
  switch (runner.kind) {
    case 'static':
      return runner.policy;
    case 'oracle':
      return `oracle:${runner.lookaheadWindows}`;
    case 'cycle':
      return `cycle:${runner.policies.join('+')}`;
    case 'threshold':
      return `threshold:${runner.x}`;
  }
};

class RunStore {
  readonly #runs = new Map<string, Promise<JobResult>>();

  set(conditionId: string, runner: AnyRunner, seed: number, run: Promise<JobResult>): void {
    // Keeps an early failure from surfacing as an unhandled rejection before it is awaited.
    run.catch(() => undefined);
    this.#runs.set(`${conditionId}|${runnerKey(runner)}|${seed}`, run);
  }

  has(conditionId: string, runner: AnyRunner, seed: number): boolean {
    return this.#runs.has(`${conditionId}|${runnerKey(runner)}|${seed}`);
  }

  /** The runs of `runner` on `seeds`, in the seeds' order. */
  get(conditionId: string, runner: AnyRunner, seeds: readonly number[]): Promise<JobResult[]> {
    return Promise.all(
      seeds.map((seed) => {
        const run = this.#runs.get(`${conditionId}|${runnerKey(runner)}|${seed}`);
        if (run === undefined) {
          throw new Error(`no ${runnerKey(runner)} run for ${conditionId}, seed ${seed}`);
        }
        return run;
      }),
    );
  }
}

const total = (o: Outcomes) => o.success + o.qosFailure + o.rejected;
const percent = (o: Outcomes, field: keyof Outcomes) =>
  total(o) > 0 ? (100 * o[field]) / total(o) : NaN;
const successOf = (runs: ReadonlyArray<{ counted: Outcomes }>) =>
  runs.map((r) => percent(r.counted, 'success'));
const snake = (name: string) => name.replaceAll('-', '_');

function progress(message: string): void {
  process.stderr.write(`aset-sim: ${message}\n`);
}

export { RunStore, percent, progress, snake, successOf };
export type { AnyRunner, AsetRunner };
