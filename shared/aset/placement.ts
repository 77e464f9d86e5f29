/**
 * The one decision the simulator and the aset-scheduler function both make for an arriving
 * stream: the workers constraints (1)-(4) admit, then the policy in force picks one of them; when
 * none is admitted the stream is rejected. One function, so what the simulator measures is what
 * the scheduler does.
 */
import { feasibleCandidates } from './constraints.js';
import type { Candidate, Policy, Scheduler, Stream, Worker } from './types.js';

/** The binding for `stream`, or undefined when no worker can take it. */
function placeStream(
  stream: Stream,
  scheduler: Scheduler,
  workers: readonly Worker[],
  loadOf: (worker: Worker) => number,
  policy: Policy,
  uniform: () => number,
): Candidate | undefined {
  const feasible = feasibleCandidates(stream, scheduler, workers, loadOf);
  return feasible.length === 0 ? undefined : policy(stream, feasible, uniform);
}

export { placeStream };
