/**
 * Picking a miner's parameter from labelled data: every sample's edge and cloud outcome is
 * computed once, then each candidate parameter is scored by what the real miner decides. Used
 * by the calibration command (on the validation split) and by bench/joint (on the test split).
 */
import type { HemName } from '../crds/index.js';
import { createMiner } from './hem.js';
import type { EdgeOutput, HardExampleMiner, HemParameters } from './hem.js';
import { argmax } from './task.js';

/** Refinement stops short of float noise: parameters closer than this decide alike. */
const minParameterStep = 1e-9;

/** What every miner's decision is scored against, computed once per model. */
interface Outcomes {
  n: number;
  edgeOutputs: EdgeOutput[];
  edgeRight: Uint8Array;
  cloudRight: Uint8Array;
  edgeCorrect: number;
  cloudCorrect: number;
  /** Edge wrong, cloud right: what offloading can fix. */
  fixable: number;
  /** Edge right, cloud wrong: what offloading can break. */
  breakable: number;
  bothWrong: number;
}

interface Point {
  parameter: number;
  /** Samples called hard (for Random: the mean over seeds, so not always an integer). */
  hard: number;
  /** Correct joint answers (mean over seeds for Random). */
  correct: number;
  /** Random only: the lowest and highest correct count over the seeds. */
  correctRange?: readonly [number, number];
}

function outcomes(
  labels: Uint8Array,
  edge: Float32Array,
  cloud: Float32Array,
  classes: number,
): Outcomes {
  const n = labels.length;
  const o: Outcomes = {
    n,
    edgeOutputs: [],
    edgeRight: new Uint8Array(n),
    cloudRight: new Uint8Array(n),
    edgeCorrect: 0,
    cloudCorrect: 0,
    fixable: 0,
    breakable: 0,
    bothWrong: 0,
  };
  for (let i = 0; i < n; i++) {
    const edgeRow = edge.subarray(i * classes, (i + 1) * classes);
    o.edgeOutputs.push({ kind: 'classification', probabilities: edgeRow });
    const e = argmax(edgeRow) === labels[i];
    const c = argmax(cloud.subarray(i * classes, (i + 1) * classes)) === labels[i];
    o.edgeRight[i] = e ? 1 : 0;
    o.cloudRight[i] = c ? 1 : 0;
    if (e) o.edgeCorrect++;
    if (c) o.cloudCorrect++;
    if (!e && c) o.fixable++;
    else if (e && !c) o.breakable++;
    else if (!e && !c) o.bothWrong++;
  }
  return o;
}

function score(miner: HardExampleMiner, o: Outcomes): { hard: number; correct: number } {
  let hard = 0;
  let correct = 0;
  for (let i = 0; i < o.n; i++) {
    if (miner.isHard(o.edgeOutputs[i]!)) {
      hard++;
      correct += o.cloudRight[i]!;
    } else correct += o.edgeRight[i]!;
  }
  return { hard, correct };
}

/**
 * The shortest decimal strictly between a and b, near their midpoint: bisecting on round numbers
 * keeps the printed parameters readable (0.995, not 0.9950000000000001) and reproducible.
 */
function between(a: number, b: number): number {
  const mid = (a + b) / 2;
  for (let digits = 1; digits <= 15; digits++) {
    const r = Number(mid.toFixed(digits));
    if (r > a && r < b) return r;
  }
  return mid;
}

/** Largest jump in offload (as a share of samples) left between neighbouring sweep points. */
function allowedGap(offload: number): number {
  // The budgets that matter lie below ~35%; elsewhere a coarse curve is enough.
  return offload <= 0.35 ? 0.0025 : 0.02;
}

/**
 * A deterministic miner over 0..1 in steps of 0.02, then bisected wherever neighbouring points
 * differ by more than allowedGap in offload: the confidences of a trained model crowd near 1, so
 * a uniform grid would leave the low-offload end of the curve almost empty.
 */
function sweep(name: HemName, key: 'threshold' | 'margin', o: Outcomes): Point[] {
  const at = (parameter: number): Point => {
    const parameters: HemParameters = { [key]: parameter };
    return { parameter, ...score(createMiner(name, parameters), o) };
  };
  let points = Array.from({ length: 51 }, (_, i) => at(i / 50));
  for (let refined = true; refined;) {
    refined = false;
    const next: Point[] = [points[0]!];
    for (let i = 1; i < points.length; i++) {
      const a = points[i - 1]!;
      const b = points[i]!;
      const gap = Math.abs(b.hard - a.hard) / o.n;
      if (gap > allowedGap(Math.min(a.hard, b.hard) / o.n)) {
        if (b.parameter - a.parameter > minParameterStep) {
          next.push(at(between(a.parameter, b.parameter)));
          refined = true;
        }
      }
      next.push(b);
    }
    points = next;
  }
  // Decisions are nested in the parameter (a step function of hardness), so equal counts mean
  // the same samples offloaded: keep one point per count, with the roundest parameter.
  const byCount = new Map<number, Point>();
  for (const p of points) {
    const kept = byCount.get(p.hard);
    if (kept === undefined || String(p.parameter).length < String(kept.parameter).length) {
      byCount.set(p.hard, p);
    }
  }
  return [...byCount.values()].sort((a, b) => a.hard - b.hard);
}

/**
 * The parameter a deployment should use: the largest offload within `maxOffload` (share of
 * samples) when aiming at a budget, or the least offload reaching `minAccuracy` (share correct).
 */
function pick(
  points: readonly Point[],
  n: number,
  target: { maxOffload: number } | { minAccuracy: number },
): Point | undefined {
  if ('maxOffload' in target) {
    return points.filter((p) => p.hard / n <= target.maxOffload).at(-1);
  }
  return points.find((p) => p.correct / n >= target.minAccuracy);
}

export { outcomes, score, sweep, pick };
export type { Outcomes, Point };
