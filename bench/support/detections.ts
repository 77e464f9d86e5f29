/** A task result's detections as the mAP code scores them (bench/detection, bench/drift). */
import type { TaskResult } from '../../shared/inference/task.js';
import type { ScoredBox } from '../../shared/training/detection-metrics.js';

function scoredBoxes(result: TaskResult): ScoredBox[] {
  if (result.kind !== 'detection') throw new Error(`expected detections, got ${result.kind}`);
  return result.detections.map((d) => ({
    x1: d.box[0],
    y1: d.box[1],
    x2: d.box[2],
    y2: d.box[3],
    score: d.score,
    cls: d.cls,
  }));
}

export { scoredBoxes };
