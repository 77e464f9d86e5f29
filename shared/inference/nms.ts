/**
 * Greedy non-maximum suppression for a detector's boxes, shared by the serving path (which turns
 * a detector's per-cell boxes into the few boxes a miner and a caller see) and the trainer's
 * evaluation, so both count the same boxes. Flat typed-array input, as an ONNX output arrives;
 * nothing here depends on the trainer.
 */

/** How `nonMaxSuppression` prunes. */
interface NmsOptions {
  /** A box is dropped when its IoU with a kept box (of its class) is above this. */
  iouThreshold: number;
  /** At most this many boxes are kept (the highest-scoring ones). */
  maxDetections: number;
  /** Suppress across classes too (default false: per class, as torchvision's batched_nms). */
  classAgnostic?: boolean;
}

/** IoU of two boxes given by their corners; a box with no area overlaps nothing. */
function overlap(
  ax1: number,
  ay1: number,
  ax2: number,
  ay2: number,
  bx1: number,
  by1: number,
  bx2: number,
  by2: number,
): number {
  const w = Math.min(ax2, bx2) - Math.max(ax1, bx1);
  const h = Math.min(ay2, by2) - Math.max(ay1, by1);
  if (!(w > 0 && h > 0)) return 0;
  const inter = w * h;
  return inter / ((ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter);
}

/**
 * Intersection over union of two boxes given as (x1, y1, x2, y2): the overlap measure both NMS
 * and mAP matching use. A degenerate box (x2 <= x1 or y2 <= y1) has no area and overlaps nothing.
 */
function iou(a: ArrayLike<number>, b: ArrayLike<number>): number {
  return overlap(a[0]!, a[1]!, a[2]!, a[3]!, b[0]!, b[1]!, b[2]!, b[3]!);
}

/** IoU of boxes i and j of a flat K x 4 array. */
function pairIou(boxes: ArrayLike<number>, i: number, j: number): number {
  const a = 4 * i;
  const b = 4 * j;
  return overlap(
    boxes[a]!,
    boxes[a + 1]!,
    boxes[a + 2]!,
    boxes[a + 3]!,
    boxes[b]!,
    boxes[b + 1]!,
    boxes[b + 2]!,
    boxes[b + 3]!,
  );
}

/**
 * The indices of the boxes that survive greedy NMS, highest score first: visit boxes by
 * descending score (ties by index, so the result is deterministic) and keep one unless it
 * overlaps an already kept box of the same class by IoU above `iouThreshold`. Classes are
 * suppressed separately unless `classAgnostic`, so two different digits that overlap are both
 * kept. A NaN score is never kept. `boxes` is K x 4 (x1, y1, x2, y2); `scores` and `classes`
 * have K entries.
 */
function nonMaxSuppression(
  boxes: ArrayLike<number>,
  scores: ArrayLike<number>,
  classes: ArrayLike<number>,
  options: NmsOptions,
): number[] {
  const count = scores.length;
  if (boxes.length !== 4 * count || classes.length !== count) {
    throw new Error(
      `nonMaxSuppression: ${boxes.length} box values, ${count} scores and ${classes.length} classes`,
    );
  }
  const order: number[] = [];
  for (let i = 0; i < count; i += 1) if (!Number.isNaN(scores[i])) order.push(i);
  order.sort((a, b) => scores[b]! - scores[a]! || a - b);
  const kept: number[] = [];
  for (const i of order) {
    if (kept.length >= options.maxDetections) break;
    const suppressed = kept.some(
      (k) =>
        (options.classAgnostic === true || classes[k] === classes[i]) &&
        pairIou(boxes, k, i) > options.iouThreshold,
    );
    if (!suppressed) kept.push(i);
  }
  return kept;
}

export { nonMaxSuppression, iou };
export type { NmsOptions };
