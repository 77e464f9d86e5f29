/**
 * What the bench reads off a learning curve (test accuracy by round), as pure functions: the
 * rounds to a target accuracy, the accuracy at a round budget, and the FedSGD-over-FedAvg round
 * speed-up, which is a lower bound when FedSGD did not reach the target within its cap.
 */

/** The global model's test accuracy (and loss) after `round` rounds; round 0 is the initial model. */
interface CurvePoint {
  readonly round: number;
  readonly accuracy: number;
  readonly loss: number;
}

/** The first evaluated round whose accuracy is at least `target`; undefined if none is. */
function roundsToTarget(curve: readonly CurvePoint[], target: number): number | undefined {
  return curve.find((p) => p.accuracy >= target)?.round;
}

/** The accuracy of the last point evaluated at or before `round`; undefined before the first. */
function accuracyAt(curve: readonly CurvePoint[], round: number): number | undefined {
  let found: number | undefined;
  for (const p of curve) if (p.round <= round) found = p.accuracy;
  return found;
}

/** The highest accuracy on the curve (0 for an empty curve). */
function bestAccuracy(curve: readonly CurvePoint[]): number {
  return curve.reduce((best, p) => Math.max(best, p.accuracy), 0);
}

/** How a condition's run to the target went. */
type Reach =
  | { readonly kind: 'reached'; readonly rounds: number }
  /** Stopped at `rounds` (the cap, or the round training diverged) below the target. */
  | { readonly kind: 'not-reached'; readonly rounds: number; readonly best: number };

/** `curve` (run for `ran` rounds) against `target`. */
function reach(curve: readonly CurvePoint[], target: number, ran: number): Reach {
  const rounds = roundsToTarget(curve, target);
  return rounds === undefined
    ? { kind: 'not-reached', rounds: ran, best: bestAccuracy(curve) }
    : { kind: 'reached', rounds };
}

/**
 * FedSGD's rounds to the target over FedAvg's. `exact` when both reached it; a `lower-bound`
 * (FedSGD's cap over FedAvg's rounds) when only FedAvg did; `undefined` when FedAvg did not.
 */
type Speedup =
  | { readonly kind: 'exact'; readonly value: number }
  | { readonly kind: 'lower-bound'; readonly value: number }
  | { readonly kind: 'undefined' };

function speedup(fedsgd: Reach, fedavg: Reach): Speedup {
  if (fedavg.kind !== 'reached') return { kind: 'undefined' };
  const value = fedsgd.rounds / fedavg.rounds;
  return fedsgd.kind === 'reached' ? { kind: 'exact', value } : { kind: 'lower-bound', value };
}

/** The speed-up as a figure (0 when undefined) and how to read it. */
function describeSpeedup(s: Speedup): { value: number; note: string } {
  if (s.kind === 'undefined') return { value: 0, note: 'FedAvg did not reach the target' };
  if (s.kind === 'lower-bound') {
    return { value: s.value, note: 'lower bound: FedSGD did not reach the target in its cap' };
  }
  return { value: s.value, note: 'both reached the target' };
}

export { roundsToTarget, accuracyAt, bestAccuracy, reach, speedup, describeSpeedup };
export type { CurvePoint, Reach, Speedup };
