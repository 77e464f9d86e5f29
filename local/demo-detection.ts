/**
 * The demo's traffic: held-out canvases of the synthetic digit-detection set sent to the deployed
 * workers over OIP v2 with binary tensors, as a camera gateway would send frames. The edge's
 * answers say per canvas which tier answered, with the final detections and the edge's own; the
 * same canvases sent straight to the cloud worker give the cloud-only figure. mAP@0.5 of each is
 * computed against the ground truth.
 */
import { encodeInferRequest, parseInferResponse } from '../shared/inference/index.js';
import type { Tensor } from '../shared/inference/index.js';
import { canvasPixels, canvasSize, loadDetectionSet } from '../shared/training/detection-data.js';
import { meanAveragePrecision } from '../shared/training/detection-metrics.js';
import type { ScoredBox } from '../shared/training/detection-metrics.js';

interface TierFigures {
  images: number;
  detections: number;
}

interface DetectionFigures {
  images: number;
  /** Canvases the edge found hard, and those the cloud answered (the rest fell back). */
  hard: number;
  offloaded: number;
  offloadRatio: number;
  tiers: { edge: TierFigures; cloud: TierFigures };
  /** mAP@0.5 in points: the edge's own answers, the cloud's, and what the callers got. */
  map: { edge: number; cloud: number; joint: number };
}

/** A [N, K, 6] detections tensor (x1, y1, x2, y2, score, class) cut to each row's count. */
function boxesOf(table: Tensor, counts: Tensor): ScoredBox[][] {
  const values = table.data as Float32Array;
  const per = (table.shape[1] ?? 0) * 6;
  return Array.from(counts.data as Int32Array, (count, row) =>
    Array.from({ length: Math.max(0, count) }, (_, k) => {
      const at = row * per + k * 6;
      return {
        x1: values[at]!,
        y1: values[at + 1]!,
        x2: values[at + 2]!,
        y2: values[at + 3]!,
        score: values[at + 4]!,
        cls: values[at + 5]!,
      };
    }),
  );
}

/** One OIP request with binary tensors both ways; the answer's tensors by name. */
async function infer(
  url: string,
  model: string,
  images: Float32Array,
  rows: number,
  outputs: readonly string[],
): Promise<Record<string, Tensor>> {
  const { body, headerLength } = encodeInferRequest({
    inputs: { image: { datatype: 'FP32', shape: [rows, 1, canvasSize, canvasSize], data: images } },
    outputs,
  });
  const answer = await fetch(`${url}/v2/models/${encodeURIComponent(model)}/infer`, {
    method: 'POST',
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(headerLength),
    },
    body,
  });
  const bytes = new Uint8Array(await answer.arrayBuffer());
  if (answer.status !== 200) {
    throw new Error(`${model} answered ${answer.status}: ${Buffer.from(bytes).toString('utf8')}`);
  }
  const length = answer.headers.get('inference-header-content-length');
  return parseInferResponse(bytes, length === null ? undefined : Number(length));
}

const points = (boxes: ScoredBox[][], truths: Parameters<typeof meanAveragePrecision>[1]) =>
  Number((100 * meanAveragePrecision(boxes, truths).map).toFixed(2));

/** The first `n` test canvases through the edge worker (joint) and the cloud worker (alone). */
async function detectCanvases(options: {
  edgeUrl: string;
  cloudUrl: string;
  edgeModel: string;
  cloudModel: string;
  n: number;
}): Promise<DetectionFigures> {
  const test = loadDetectionSet().test;
  const n = Math.min(options.n, test.n);
  const joint: ScoredBox[][] = [];
  const edge: ScoredBox[][] = [];
  const cloud: ScoredBox[][] = [];
  const tiers = { edge: { images: 0, detections: 0 }, cloud: { images: 0, detections: 0 } };
  let hard = 0;
  for (let from = 0; from < n; from += 32) {
    const rows = Math.min(32, n - from);
    const images = test.images.slice(from * canvasPixels, (from + rows) * canvasPixels);
    const answer = await infer(options.edgeUrl, options.edgeModel, images, rows, [
      'detections',
      'num_detections',
      'tier',
      'hard',
      'edge_detections',
      'edge_num_detections',
    ]);
    const final = boxesOf(answer['detections']!, answer['num_detections']!);
    joint.push(...final);
    edge.push(...boxesOf(answer['edge_detections']!, answer['edge_num_detections']!));
    (answer['tier']!.data as string[]).forEach((tier, i) => {
      const figures = tier === 'cloud' ? tiers.cloud : tiers.edge;
      figures.images += 1;
      figures.detections += final[i]!.length;
    });
    hard += (answer['hard']!.data as Uint8Array).reduce((a, b) => a + b, 0);
    const alone = await infer(options.cloudUrl, options.cloudModel, images, rows, [
      'detections',
      'num_detections',
    ]);
    cloud.push(...boxesOf(alone['detections']!, alone['num_detections']!));
  }
  const truths = test.boxes.slice(0, n);
  return {
    images: n,
    hard,
    offloaded: tiers.cloud.images,
    offloadRatio: Number((tiers.cloud.images / n).toFixed(4)),
    tiers,
    map: { edge: points(edge, truths), cloud: points(cloud, truths), joint: points(joint, truths) },
  };
}

export { detectCanvases };
export type { DetectionFigures };
