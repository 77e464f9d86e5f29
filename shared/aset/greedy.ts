/**
 * The deployed meta-policy's decision, apart from the DQN trainer (dqn.ts) because the
 * aset-scheduler function needs this alone and dqn.ts brings the trainer and the ONNX writer
 * (onnx-proto) with it.
 */

/**
 * The index of the largest Q-value; equal values go to the lowest index, so a greedy choice is
 * reproducible (and an untrained network with tied outputs picks action 0, not whichever the
 * floating-point noise favours). NaN never wins.
 */
function greedyAction(q: ArrayLike<number>): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let a = 0; a < q.length; a += 1) {
    const v = q[a]!;
    if (v > bestValue) {
      best = a;
      bestValue = v;
    }
  }
  return best;
}

export { greedyAction };
