/**
 * Where a simulation's streams come from, in arrival order: the generated Table I workload, or a
 * fixed list (tests, replays). Checked once here so the event loop can trust the order.
 */
import { durationScaleFor } from '../../../shared/aset/scenario.js';
import type { SimulationOptions } from './simulator.js';
import { Workload } from './workload.js';
import type { StreamArrival } from './workload.js';

/** Ordered stream source: the generated workload or a fixed list. */
interface ArrivalSource {
  peekMs(): number;
  next(): StreamArrival;
  /** An independent source standing where this one stands: it yields what this one would. */
  fork(): ArrivalSource;
}

/** Replays a fixed, sorted list of arrivals, from position `from` on. */
function listSource(arrivals: readonly StreamArrival[], from = 0): ArrivalSource {
  let i = from;
  return {
    peekMs: () => arrivals[i]?.atMs ?? Infinity,
    next: () => {
      const arrival = arrivals[i];
      if (arrival === undefined) throw new RangeError('no further arrivals');
      i += 1;
      return arrival;
    },
    // The list itself is never written, so a fork shares it and copies only the position.
    fork: () => listSource(arrivals, i),
  };
}

/** The arrival source the options ask for, checked: a sorted list, or the generated workload. */
function sourceFor(options: SimulationOptions): ArrivalSource {
  if (options.arrivals !== undefined) {
    for (let i = 1; i < options.arrivals.length; i += 1) {
      if (options.arrivals[i]!.atMs < options.arrivals[i - 1]!.atMs) {
        throw new RangeError('arrivals must be sorted by atMs');
      }
    }
    return listSource(options.arrivals);
  }
  if (options.apps === undefined || options.lambda === undefined) {
    throw new RangeError('a simulation needs either arrivals, or apps and lambda');
  }
  return new Workload({
    apps: options.apps,
    schedulers: options.topology.schedulers.map((s) => s.id),
    lambda: options.lambda,
    durationScale: options.durationScale ?? durationScaleFor(options.apps),
    seed: options.seed,
  });
}

export { sourceFor };
export type { ArrivalSource };
