/**
 * Mean average precision, PASCAL VOC style (the 2010+ all-point interpolation), the figure the
 * model card and the joint-inference benchmark compare detectors by. Written out here rather than
 * taken from a package so that every number in the card can be traced to these few lines.
 */
import { iou } from '../inference/nms.js';

/** A detection: corners in pixels, its confidence, and its class. */
interface ScoredBox {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  score: number;
  cls: number;
}

/** A ground-truth box. */
interface LabelledBox {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  cls: number;
}

interface MapResult {
  /** Mean of `perClass` over the classes that have ground truth. */
  map: number;
  /** AP per class index; NaN for a class with no ground-truth box (it is left out of the mean). */
  perClass: number[];
}

const corners = (b: LabelledBox): [number, number, number, number] => [b.x1, b.y1, b.x2, b.y2];

/**
 * The area under the precision-recall curve after making precision monotone (each point takes
 * the best precision at any higher recall): VOC's all-point interpolation.
 */
function interpolatedAp(tp: readonly boolean[], positives: number): number {
  const recall: number[] = [0];
  const precision: number[] = [0];
  let hits = 0;
  tp.forEach((hit, k) => {
    if (hit) hits += 1;
    recall.push(hits / positives);
    precision.push(hits / (k + 1));
  });
  recall.push(1);
  precision.push(0);
  for (let i = precision.length - 2; i >= 0; i -= 1) {
    precision[i] = Math.max(precision[i]!, precision[i + 1]!);
  }
  let ap = 0;
  for (let i = 1; i < recall.length; i += 1) {
    ap += (recall[i]! - recall[i - 1]!) * precision[i]!;
  }
  return ap;
}

/**
 * One class's detections in descending score order (ties by image, then by position in the
 * image's list, so the result does not depend on sort stability), each marked true positive when
 * its best-overlapping ground truth of the class reaches `iouThreshold` and was not matched by a
 * higher-scoring detection. A detection whose best match is taken is a false positive, as in VOC
 * (it does not fall back to its second-best ground truth).
 */
function matchClass(
  predictions: ReadonlyArray<readonly ScoredBox[]>,
  truths: ReadonlyArray<readonly LabelledBox[]>,
  cls: number,
  iouThreshold: number,
): boolean[] {
  const candidates: Array<{ image: number; box: ScoredBox; order: number }> = [];
  predictions.forEach((boxes, image) =>
    boxes.forEach((box, order) => {
      if (box.cls === cls) candidates.push({ image, box, order });
    }),
  );
  candidates.sort((a, b) => b.box.score - a.box.score || a.image - b.image || a.order - b.order);
  const matched = truths.map((boxes) => boxes.map(() => false));
  return candidates.map(({ image, box }) => {
    let best = -1;
    let bestIou = 0;
    (truths[image] ?? []).forEach((truth, t) => {
      if (truth.cls !== cls) return;
      const overlap = iou(corners(box), corners(truth));
      if (overlap > bestIou) {
        bestIou = overlap;
        best = t;
      }
    });
    if (best < 0 || bestIou < iouThreshold || matched[image]![best]) return false;
    matched[image]![best] = true;
    return true;
  });
}

/**
 * mAP at one IoU threshold over a set of images: `predictions[i]` and `truths[i]` are image i's
 * detections and ground truth. A detection matches at IoU >= `iouThreshold`. Per class, AP is the
 * all-point interpolated area under its precision-recall curve; the mean is over the classes with
 * at least one ground-truth box (detections of other classes change nothing). `perClass` covers
 * the classes 0 to the largest class index seen in either list.
 */
function meanAveragePrecision(
  predictions: ReadonlyArray<readonly ScoredBox[]>,
  truths: ReadonlyArray<readonly LabelledBox[]>,
  iouThreshold = 0.5,
): MapResult {
  if (predictions.length !== truths.length) {
    throw new Error(`${predictions.length} prediction lists for ${truths.length} images`);
  }
  let classes = 0;
  for (const boxes of [...predictions, ...truths]) {
    for (const box of boxes) classes = Math.max(classes, box.cls + 1);
  }
  const perClass: number[] = [];
  for (let cls = 0; cls < classes; cls += 1) {
    let positives = 0;
    for (const boxes of truths) for (const box of boxes) if (box.cls === cls) positives += 1;
    perClass.push(
      positives === 0
        ? Number.NaN
        : interpolatedAp(matchClass(predictions, truths, cls, iouThreshold), positives),
    );
  }
  const present = perClass.filter((ap) => !Number.isNaN(ap));
  const map = present.length === 0 ? 0 : present.reduce((a, b) => a + b, 0) / present.length;
  return { map, perClass };
}

export { meanAveragePrecision };
export type { ScoredBox, LabelledBox, MapResult };
