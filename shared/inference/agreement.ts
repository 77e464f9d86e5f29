/**
 * What answering a sample at the edge costs against the cloud, the unit the accuracy objective
 * counts. Classification: when the top classes differ, the cloud's probability of its own class
 * minus its probability of the edge's, that is the accuracy the edge's answer loses in
 * expectation if the cloud's probabilities are right (0 when they agree). Counting every
 * disagreement as a loss would also charge the edge for the cloud's mistakes: on the committed
 * digits that alone offloads 7 points more than the labelled calibration at a 1-point objective.
 * Detection: the share of objects the two do not agree on: the boxes each model is confident in
 * (score >= 0.5) paired one to one with a box of the same class overlapping it by IoU >= 0.5 (as
 * mAP@0.5 matches a detection to a ground truth), over the larger of the two sets. mAP counts
 * objects, not images: an image with one of four digits wrong loses a quarter, not all of it.
 */
import { iou } from './nms.js';
import { argmax } from './task.js';
import type { TaskResult } from './task.js';

const confident = 0.5;
const matchIou = 0.5;

type Detections = Extract<TaskResult, { kind: 'detection' }>['detections'];

/** The share of objects (the larger of the two confident sets) that do not pair up. */
function objectLoss(a: Detections, b: Detections): number {
  const left = a.filter((d) => d.score >= confident);
  const right = b.filter((d) => d.score >= confident);
  const objects = Math.max(left.length, right.length);
  if (objects === 0) return 0;
  let matched = 0;
  const taken = new Array<boolean>(right.length).fill(false);
  // Greedy by score, as mAP matching: each confident edge box takes its best free cloud box.
  for (const d of [...left].sort((x, y) => y.score - x.score)) {
    let best = -1;
    let bestIou = matchIou;
    right.forEach((c, j) => {
      if (taken[j] || c.cls !== d.cls) return;
      const overlap = iou(d.box, c.box);
      if (overlap >= bestIou) {
        best = j;
        bestIou = overlap;
      }
    });
    if (best < 0) continue;
    taken[best] = true;
    matched += 1;
  }
  return 1 - matched / objects;
}

/**
 * In [0, 1]; undefined when the task has no notion of the same answer (raw outputs). With
 * `trustCloud` false every disagreement counts in full: on inputs found to have drifted the
 * cloud's probabilities are no longer known to be calibrated, so the estimate may not lean on them.
 */
function lossAgainstCloud(
  edge: TaskResult,
  cloud: TaskResult,
  trustCloud = true,
): number | undefined {
  if (edge.kind === 'classification' && cloud.kind === 'classification') {
    const e = argmax(edge.probabilities);
    const c = argmax(cloud.probabilities);
    if (e === c) return 0;
    if (!trustCloud) return 1;
    const p = cloud.probabilities;
    let sum = 0;
    for (let i = 0; i < p.length; i += 1) sum += p[i]!;
    return sum > 0 ? Math.min(1, Math.max(0, (p[c]! - p[e]!) / sum)) : 1;
  }
  if (edge.kind === 'detection' && cloud.kind === 'detection') {
    return objectLoss(edge.detections, cloud.detections);
  }
  return undefined;
}

export { lossAgainstCloud };
