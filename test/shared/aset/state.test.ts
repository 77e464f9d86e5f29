/** The DQN state: eq. (11) samples averaged into time slices and scaled by worker capacity. */
import { describe, expect, it } from 'vitest';
import { featuresPerWorker, LOAD, STREAMS } from '../../../shared/aset/observation.js';
import type { Observation } from '../../../shared/aset/observation.js';
import type { SimulationWindow } from '../../../shared/aset/window.js';
import { encodeState, stateSize, timeSlices as defaultSlices } from '../../../shared/aset/state.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName, Topology, Worker } from '../../../shared/aset/types.js';

/** Only what the encoding reads of a topology: the workers' capacities. */
const topology = {
  name: 'two',
  workers: [{ capacity: 100 }, { capacity: 50 }] as unknown as Worker[],
} as unknown as Topology;
const rowSize = 2 * featuresPerWorker;
/** The slicing is exercised with five slices; the trainer's default is one (the window mean). */
const timeSlices = 5;

function sample(timeMs: number, set: (row: Float32Array) => void): Observation {
  const features = new Float32Array(rowSize);
  set(features);
  return { timeMs, features, success: 0, qosFailure: 0, rejected: 0 };
}

function window(samples: Observation[], policy: PolicyName = 'farthest'): SimulationWindow {
  return { startMs: 0, endMs: 25_000, policy, success: 0, qosFailure: 0, rejected: 0, samples };
}

describe('ASET state encoding', () => {
  it('is all zeros before the first window', () => {
    const state = encodeState(topology, undefined);
    expect(state.length).toBe(stateSize(topology));
    expect(state.length).toBe(defaultSlices * rowSize + policyNames.length);
    expect(stateSize(topology, timeSlices)).toBe(timeSlices * rowSize + policyNames.length);
    expect(state.every((v) => v === 0)).toBe(true);
  });

  it('averages consecutive samples into slices and scales by capacity', () => {
    // 10 samples -> 5 slices of 2; worker 0's load is 10 * i, worker 1's streams are i.
    const samples = Array.from({ length: 10 }, (_, i) =>
      sample(i * 1000, (row) => {
        row[LOAD] = 10 * i;
        row[featuresPerWorker + STREAMS] = i;
      }),
    );
    const state = encodeState(topology, window(samples), undefined, timeSlices);
    for (let s = 0; s < timeSlices; s += 1) {
      const meanI = (2 * s + 2 * s + 1) / 2;
      // load / C0 = 10 i / 100; streams * 10 / C1 = i * 10 / 50
      expect(state[s * rowSize + LOAD]).toBeCloseTo((10 * meanI) / 100, 6);
      expect(state[s * rowSize + featuresPerWorker + STREAMS]).toBeCloseTo((meanI * 10) / 50, 6);
    }
  });

  it('puts a short window in the newest slices and clips overloads at 4', () => {
    const samples = [sample(0, (row) => (row[LOAD] = 1_000))];
    const state = encodeState(
      topology,
      window(samples),
      new Float32Array(stateSize(topology, timeSlices)),
      timeSlices,
    );
    for (let s = 0; s < timeSlices - 1; s += 1) {
      expect(state.subarray(s * rowSize, (s + 1) * rowSize).every((v) => v === 0)).toBe(true);
    }
    expect(state[(timeSlices - 1) * rowSize + LOAD]).toBe(4);
  });

  it('by default averages the whole window into one slice', () => {
    const samples = Array.from({ length: 25 }, (_, i) =>
      sample(i * 1000, (row) => (row[LOAD] = i)),
    );
    const state = encodeState(topology, window(samples));
    expect(defaultSlices).toBe(1);
    expect(state[LOAD]).toBeCloseTo(12 / 100, 6);
  });

  it('ends with the policy the window was played under, one-hot', () => {
    for (const policy of policyNames) {
      const state = encodeState(topology, window([], policy));
      const tail = Array.from(state.subarray(rowSize));
      expect(tail).toEqual(policyNames.map((p) => (p === policy ? 1 : 0)));
      expect(state.subarray(0, rowSize).every((v) => v === 0)).toBe(true);
    }
    const sliced = encodeState(topology, window([], 'cheaper'), undefined, timeSlices);
    expect(sliced[timeSlices * rowSize + policyNames.indexOf('cheaper')]).toBe(1);
  });

  it('reuses the output buffer without leaking the previous state', () => {
    const out = encodeState(topology, window([sample(0, (row) => (row[LOAD] = 50))]));
    encodeState(topology, undefined, out);
    expect(out.every((v) => v === 0)).toBe(true);
  });
});
