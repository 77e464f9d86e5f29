/**
 * The DQN's state (paper section IV-B): eq. (11) per worker, for the samples of the last window
 * of T, as one flat vector. Two choices of ours, both about what a small network can learn from:
 *
 * - Time: the window's per-second samples are averaged over the window, as the paper writes
 *   ("averaged along a time window of size T"): `timeSlices` = 1. Averaging into several
 *   consecutive slices instead (5 of 5 s kept the trend inside the window) is still supported,
 *   but gave the Q-network five times the inputs for the same few thousand transitions, and it
 *   learned worse with them (docs/aset.md).
 * - Scale: every feature is divided by the worker's capacity C_w (|I_w| by C_w / 10, since a
 *   stream carries about ten queries per second), so 1 means "as much as the worker can take"
 *   on every worker and in every topology, and clipped at 4 so an overloaded worker cannot
 *   swamp the input.
 *
 * One addition to eq. (11): the policy the window just ended was played under, one-hot, after
 * the workers' features. `npm run bench -- aset-signal` finds the workers' features predict
 * nothing about which policy to switch to that a state-blind rule does not already know, and
 * what such a rule gains on full-edge is a mix (farthest with load balancing in turns); a
 * deterministic network that cannot see its own last choice cannot take turns.
 *
 * Layout: slice-major, then worker (in `Worker.index` order), then the eq. (11) features; then
 * the seven policies in `policyNames` order.
 */
import { STREAMS, featuresPerWorker } from './observation.js';
import type { SimulationWindow } from './window.js';
import { policyNames } from './types.js';
import type { Topology } from './types.js';

/** Averages of the window's samples the state keeps, oldest first (default of `slices`). */
const timeSlices = 1;
const clip = 4;
const queriesPerStream = 10;

/** Length of the state vector for `topology`: what the Q-network takes. */
function stateSize(topology: Topology, slices = timeSlices): number {
  return slices * topology.workers.length * featuresPerWorker + policyNames.length;
}

/** 1 / capacity per worker, for the unbounded cloud 0 (its features carry no load signal). */
function scales(topology: Topology): Float64Array {
  return Float64Array.from(topology.workers, (w) =>
    Number.isFinite(w.capacity) && w.capacity > 0 ? 1 / w.capacity : 0,
  );
}

/**
 * The state after `window` (zeros before the first window). When the window holds fewer samples
 * than slices, the missing oldest slices stay zero.
 */
function encodeState(
  topology: Topology,
  window: SimulationWindow | undefined,
  into?: Float32Array,
  timeSlots = timeSlices,
): Float32Array {
  const out = into ?? new Float32Array(stateSize(topology, timeSlots));
  out.fill(0);
  // The one-hot is the vector's tail, after every slice of every worker.
  if (window !== undefined)
    out[out.length - policyNames.length + policyNames.indexOf(window.policy)] = 1;
  const samples = window?.samples ?? [];
  if (samples.length === 0) return out;
  const workers = topology.workers.length;
  const rowSize = workers * featuresPerWorker;
  const inverse = scales(topology);
  const slices = Math.min(timeSlots, samples.length);
  for (let s = 0; s < slices; s += 1) {
    // Slice s of `slices` covers samples [from, to); they land in the newest slots.
    const from = Math.floor((s * samples.length) / slices);
    const to = Math.floor(((s + 1) * samples.length) / slices);
    const base = (timeSlots - slices + s) * rowSize;
    for (let i = from; i < to; i += 1) {
      const features = samples[i]!.features;
      for (let j = 0; j < rowSize; j += 1) out[base + j]! += features[j]!;
    }
    const count = to - from;
    for (let w = 0; w < workers; w += 1) {
      const row = base + w * featuresPerWorker;
      for (let f = 0; f < featuresPerWorker; f += 1) {
        const perUnit = f === STREAMS ? queriesPerStream : 1;
        const value = (out[row + f]! / count) * perUnit * inverse[w]!;
        out[row + f] = Math.min(value, clip);
      }
    }
  }
  return out;
}

export { encodeState, stateSize, timeSlices };
