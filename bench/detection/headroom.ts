/**
 * Why the detection gap is the edge's blindness and not the budget's: per canvas, the errors each
 * tier makes at a working score (a digit with no box of its class at IoU >= 0.5, and a box that
 * matches no digit of its class), and how well a hardness read from the edge's outputs finds the
 * canvases where the edge errs more than the cloud. Those are the only canvases an offload mends;
 * when they outnumber the budget, or a miner cannot tell them apart, the joint answer stays short
 * of the cloud whatever the miner's parameters.
 */
import { iou } from '../../shared/inference/nms.js';
import { seededRandom, shuffle } from '../../shared/random/index.js';
import type { LabelledBox, ScoredBox } from '../../shared/training/detection-metrics.js';
import { printTable } from '../support/report.js';

const corners = (b: LabelledBox): [number, number, number, number] => [b.x1, b.y1, b.x2, b.y2];
const matches = (box: ScoredBox, truth: LabelledBox) =>
  box.cls === truth.cls && iou(corners(box), corners(truth)) >= 0.5;

/** Missed digits plus boxes that match no digit, counting only boxes scored at least `minScore`. */
function canvasErrors(
  boxes: readonly ScoredBox[],
  truths: readonly LabelledBox[],
  minScore: number,
): number {
  const kept = boxes.filter((b) => b.score >= minScore);
  const missed = truths.filter((t) => !kept.some((b) => matches(b, t))).length;
  const stray = kept.filter((b) => !truths.some((t) => matches(b, t))).length;
  return missed + stray;
}

/** The probability that a positive ranks above a negative (ties count half): ROC AUC. */
function auc(rank: readonly number[], positive: readonly boolean[]): number {
  const pos = rank.filter((_, i) => positive[i]);
  const neg = rank.filter((_, i) => !positive[i]);
  if (pos.length === 0 || neg.length === 0) return Number.NaN;
  let wins = 0;
  for (const p of pos) for (const n of neg) wins += p > n ? 1 : p === n ? 0.5 : 0;
  return wins / (pos.length * neg.length);
}

/** The first `share` of the canvases in the order of `rank`, hardest first, ties by index. */
function hardest(rank: readonly number[], share: number): boolean[] {
  const order = rank.map((_, i) => i).sort((a, b) => rank[b]! - rank[a]! || a - b);
  const hard = new Array<boolean>(rank.length).fill(false);
  for (const i of order.slice(0, Math.floor(share * rank.length))) hard[i] = true;
  return hard;
}

/** How many positives the top `share` of `rank` holds. */
function recallAt(rank: readonly number[], positive: readonly boolean[], share: number): number {
  return hardest(rank, share).filter((hard, i) => hard && positive[i]).length;
}

interface Ranking {
  name: string;
  /** Per canvas, higher = harder. */
  rank: readonly number[];
}

/**
 * The joint mAP when the budget holds `k` of the `worse` canvases and the rest of it is drawn
 * from the others: what a miner with that hit count would get, as the mean of four seeded draws.
 */
function jointWithHits(
  worse: readonly boolean[],
  k: number,
  budget: number,
  jointMap: (hard: readonly boolean[]) => number,
): number {
  const random = seededRandom(20261125 + k);
  const indices = worse.map((_, i) => i);
  const draws = Array.from({ length: 4 }, () => {
    const hard = new Array<boolean>(worse.length).fill(false);
    const pick = (pool: number[], n: number) => {
      for (const i of shuffle(pool, random).slice(0, n)) hard[i] = true;
    };
    pick(
      indices.filter((i) => worse[i]),
      k,
    );
    pick(
      indices.filter((i) => !worse[i]),
      budget - k,
    );
    return jointMap(hard);
  });
  return draws.reduce((a, b) => a + b, 0) / draws.length;
}

interface Headroom {
  /** Share of canvases where the edge errs more than the cloud, at score >= 0.3. */
  edgeWorseShare: number;
  /** Each ranking's AUC at finding those canvases (score >= 0.3), in the order given. */
  auc: number[];
  /** The fewest of them (in steps of 25) the budget must hold to come within 1 point of `goal`. */
  hitsNeeded: number | null;
}

/** Prints the three tables; returns their figures at the lower working score. */
function printHeadroom(
  truths: ReadonlyArray<readonly LabelledBox[]>,
  edge: ReadonlyArray<readonly ScoredBox[]>,
  cloud: ReadonlyArray<readonly ScoredBox[]>,
  rankings: readonly Ranking[],
  budget: number,
  joint: { map: (hard: readonly boolean[]) => number; goal: number },
): Headroom {
  const levels = [0.3, 0.5].map((minScore) => {
    const edgeErrors = edge.map((b, i) => canvasErrors(b, truths[i]!, minScore));
    const cloudErrors = cloud.map((b, i) => canvasErrors(b, truths[i]!, minScore));
    const worse = edgeErrors.map((e, i) => e > cloudErrors[i]!);
    return { minScore, edgeErrors, cloudErrors, worse, count: worse.filter(Boolean).length };
  });
  const top = `${100 * budget}%`;
  printTable(
    `canvases an offload can mend, test split: where the edge errs more than the cloud (a digit without a box of its class at IoU >= 0.5, or a box matching no digit)`,
    ['boxes scored >=', 'edge errs', 'cloud errs', 'edge errs more', '% of canvases'],
    levels.map((l) => [
      l.minScore,
      l.edgeErrors.filter((e) => e > 0).length,
      l.cloudErrors.filter((e) => e > 0).length,
      l.count,
      Number(((100 * l.count) / truths.length).toFixed(1)),
    ]),
  );
  const aucs = rankings.map((r) => levels.map((l) => auc(r.rank, l.worse)));
  printTable(
    `how well a hardness read from the edge's outputs finds them: ROC AUC, and how many of them its hardest ${top} holds`,
    [
      'hardness (hardest first)',
      ...levels.flatMap((l) => [`AUC (>= ${l.minScore})`, `in top ${top} (of ${l.count})`]),
    ],
    rankings.map((r, k) => [
      r.name,
      ...levels.flatMap((l, j) => [
        Number(aucs[k]![j]!.toFixed(3)),
        recallAt(r.rank, l.worse, budget),
      ]),
    ]),
  );
  const { worse, count } = levels[0]!;
  const slots = Math.floor(budget * truths.length);
  const hits = Array.from(
    { length: Math.floor(Math.min(count, slots) / 25) },
    (_, i) => 25 * (i + 1),
  );
  const maps = hits.map((k) => jointWithHits(worse, k, slots, joint.map));
  printTable(
    `joint mAP@0.5 if a miner's hardest ${top} held k of the ${count} (score >= 0.3; the rest of the ${top} drawn from the other canvases, mean of 4 seeded draws), against the cloud's ${(100 * joint.goal).toFixed(2)}`,
    ['k', 'joint mAP', 'gap to cloud'],
    hits.map((k, i) => [
      k,
      Number((100 * maps[i]!).toFixed(2)),
      Number((100 * (joint.goal - maps[i]!)).toFixed(2)),
    ]),
  );
  const reached = hits.find((_, i) => joint.goal - maps[i]! <= 0.01);
  return {
    edgeWorseShare: count / truths.length,
    auc: aucs.map((a) => a[0]!),
    hitsNeeded: reached ?? null,
  };
}

export { printHeadroom, canvasErrors, auc, hardest };
export type { Ranking };
