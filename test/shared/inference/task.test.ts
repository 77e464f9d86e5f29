/**
 * Task adapters on hand-computed outputs: what a detector's or a classifier's tensors become,
 * what IBT and CrossEntropy then decide (zero boxes, one box, all below the score floor), and the
 * settings refused at start-up because they do not fit the model.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors/index.js';
import { createMiner, createTaskAdapter } from '../../../shared/inference/index.js';
import type { Signature, Tensor, TaskResult } from '../../../shared/inference/index.js';

const f32 = (shape: number[], values: number[]): Tensor => ({
  datatype: 'FP32',
  shape,
  data: Float32Array.from(values),
});

/** A detector with K = 3 candidate boxes per image, per-class scores over 2 classes. */
const detector: Signature = {
  inputs: [{ name: 'image', datatype: 'FP32', shape: [-1, 1, 8, 8] }],
  outputs: [
    { name: 'boxes', datatype: 'FP32', shape: [-1, 3, 4] },
    { name: 'scores', datatype: 'FP32', shape: [-1, 3] },
    { name: 'class_scores', datatype: 'FP32', shape: [-1, 3, 2] },
  ],
  batched: true,
};

/** One image's raw outputs: three boxes with their scores and class distributions. */
function image(boxes: number[][], scores: number[], classes: number[][]): Record<string, Tensor> {
  return {
    boxes: f32([1, 3, 4], boxes.flat()),
    scores: f32([1, 3], scores),
    class_scores: f32([1, 3, 2], classes.flat()),
  };
}

const detections = (r: TaskResult) => (r.kind === 'detection' ? r.detections : []);

describe('detection adapter', () => {
  const task = createTaskAdapter({}, detector, 0.6);
  const ibt = createMiner('IBT'); // thresholdImg 0.5, thresholdBox 0.5
  const ce = createMiner('CrossEntropy', { threshold: 0.5 });

  it('auto reads a signature with boxes as a detector', () => {
    expect(task.kind).toBe('detection');
    expect(task.outputs.map((o) => o.name)).toEqual(['detections', 'num_detections']);
  });

  it('drops boxes under the score floor, suppresses overlaps of a class, and keeps the rest', () => {
    const [result] = task.fromModel(
      image(
        [
          [0, 0, 10, 10],
          [1, 1, 10, 10], // IoU with the first: 81/100 = 0.81 > 0.6, same class: suppressed
          [20, 20, 30, 30],
        ],
        [0.9, 0.8, 0.04], // the third is under the 0.05 floor
        [
          [0.9, 0.1],
          [0.8, 0.2],
          [0.1, 0.9],
        ],
      ),
      1,
    );
    expect(detections(result!).map((d) => [d.box, d.score, d.cls])).toEqual([
      [[0, 0, 10, 10], expect.closeTo(0.9, 6), 0],
    ]);
    // One box, score 0.9 > thresholdBox: 0 of 1 low, not hard. Its class distribution
    // [0.9, 0.1]: normalized entropy 0.469 < 0.5, not hard.
    expect(ibt.isHard(task.minerInput(result!))).toBe(false);
    expect(ce.hardness(task.minerInput(result!))).toBeCloseTo(0.468996, 5);
    expect(ce.isHard(task.minerInput(result!))).toBe(false);
  });

  it('keeps overlapping boxes of different classes, and at 0.9 IoU both of one class', () => {
    const raw = image(
      [
        [0, 0, 10, 10],
        [1, 1, 10, 10],
        [0, 0, 0, 0],
      ],
      [0.9, 0.8, 0],
      [
        [0.9, 0.1],
        [0.2, 0.8],
        [0.5, 0.5],
      ],
    );
    expect(detections(task.fromModel(raw, 1)[0]!).map((d) => d.cls)).toEqual([0, 1]);
    const loose = createTaskAdapter({ nmsThreshold: 0.9 }, detector, 0.6);
    const sameClass = image(
      [
        [0, 0, 10, 10],
        [1, 1, 10, 10],
        [0, 0, 0, 0],
      ],
      [0.9, 0.8, 0],
      [
        [0.9, 0.1],
        [0.9, 0.1],
        [0.5, 0.5],
      ],
    );
    expect(detections(loose.fromModel(sameClass, 1)[0]!)).toHaveLength(2); // 0.81 <= 0.9
  });

  it('suppresses across classes with agnosticNms, keeping the higher-scoring box', () => {
    const overlapping = image(
      [
        [0, 0, 10, 10],
        [1, 1, 10, 10],
        [20, 20, 30, 30],
      ],
      [0.8, 0.9, 0.7],
      [
        [0.9, 0.1],
        [0.2, 0.8],
        [0.9, 0.1],
      ],
    );
    const agnostic = createTaskAdapter({ agnosticNms: true }, detector, 0.6);
    // IoU 0.81 > 0.6: the class-1 box (0.9) suppresses the class-0 one (0.8); the far box stays.
    expect(
      detections(agnostic.fromModel(overlapping, 1)[0]!).map((d) => [
        d.cls,
        Number(d.score.toFixed(3)),
      ]),
    ).toEqual([
      [1, 0.9],
      [0, 0.7],
    ]);
    expect(detections(task.fromModel(overlapping, 1)[0]!)).toHaveLength(3);
  });

  it('calls an image hard when every box is under the floor (zero boxes), for IBT and CrossEntropy', () => {
    const [result] = task.fromModel(
      image(
        [
          [0, 0, 10, 10],
          [20, 20, 30, 30],
          [40, 40, 50, 50],
        ],
        [0.01, 0.02, 0.049],
        [
          [0.5, 0.5],
          [0.5, 0.5],
          [0.5, 0.5],
        ],
      ),
      1,
    );
    expect(detections(result!)).toEqual([]);
    expect(ibt.hardness(task.minerInput(result!))).toBe(1);
    expect(ibt.isHard(task.minerInput(result!))).toBe(true);
    expect(ce.isHard(task.minerInput(result!))).toBe(true);
  });

  it('follows IBT on two boxes, one low: 1/2 low >= 1 - 0.5, hard', () => {
    const [result] = task.fromModel(
      image(
        [
          [0, 0, 10, 10],
          [20, 20, 30, 30],
          [0, 0, 0, 0],
        ],
        [0.9, 0.5, 0], // 0.5 <= thresholdBox: low (inclusive, as Sedna)
        [
          [1, 0],
          [0, 1],
          [0.5, 0.5],
        ],
      ),
      1,
    );
    expect(ibt.hardness(task.minerInput(result!))).toBe(0.5);
    expect(ibt.isHard(task.minerInput(result!))).toBe(true);
    expect(createMiner('IBT', { thresholdImg: 0.4 }).isHard(task.minerInput(result!))).toBe(false);
  });

  it('writes the task tensors padded to the batch largest K, and reads them back', () => {
    const results: TaskResult[] = [
      {
        kind: 'detection',
        detections: [
          { box: [0, 0, 1, 1], score: 0.5, cls: 3 },
          { box: [2, 2, 3, 3], score: 0.25, cls: 1 },
        ],
      },
      { kind: 'detection', detections: [] },
    ];
    const tensors = task.toTensors(results);
    expect(tensors['detections']!.shape).toEqual([2, 2, 6]);
    expect(Array.from(tensors['num_detections']!.data as Int32Array)).toEqual([2, 0]);
    expect(task.fromTask(tensors, 2)).toEqual(results);
  });

  it('reads the other box layouts, class ids, and a count output (no NMS then)', () => {
    const signature: Signature = {
      inputs: detector.inputs,
      outputs: [
        { name: 'detection_boxes', datatype: 'FP32', shape: [-1, 2, 4] },
        { name: 'detection_scores', datatype: 'FP32', shape: [-1, 2] },
        { name: 'detection_classes', datatype: 'FP32', shape: [-1, 2] },
        { name: 'num_detections', datatype: 'FP32', shape: [-1] },
      ],
      batched: true,
    };
    const raw = {
      detection_boxes: f32([1, 2, 4], [5, 5, 4, 2, 5, 5, 4, 2]),
      detection_scores: f32([1, 2], [0.9, 0.8]),
      detection_classes: f32([1, 2], [7, 7]),
      num_detections: f32([1], [2]),
    };
    const cxcywh = createTaskAdapter({ boxFormat: 'cxcywh' }, signature);
    // Two identical boxes: the model did NMS (count given), so both stay.
    expect(detections(cxcywh.fromModel(raw, 1)[0]!).map((d) => [d.box, d.cls])).toEqual([
      [[3, 4, 7, 6], 7],
      [[3, 4, 7, 6], 7],
    ]);
    const xywh = createTaskAdapter({ boxFormat: 'xywh', nms: 'always' }, signature);
    expect(detections(xywh.fromModel(raw, 1)[0]!).map((d) => d.box)).toEqual([[5, 5, 9, 7]]);
  });

  it('refuses settings that do not fit the model, naming the setting', () => {
    const classifier: Signature = {
      inputs: detector.inputs,
      outputs: [
        { name: 'logits', datatype: 'FP32', shape: [-1, 10] },
        { name: 'features', datatype: 'FP32', shape: [-1, 64] },
      ],
      batched: true,
    };
    const refused = (spec: Parameters<typeof createTaskAdapter>[0], signature: Signature) => {
      try {
        createTaskAdapter(spec, signature);
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused({ kind: 'detection' }, classifier)).toMatch(/task\.boxes: .*name it/);
    expect(refused({ kind: 'detection', boxes: 'logits' }, classifier)).toMatch(
      /task\.boxes: output logits has shape \[-1,10\], not \[N, K, 4\]/,
    );
    expect(refused({ kind: 'classification' }, classifier)).toMatch(
      /task\.output: the model has several outputs/,
    );
    expect(refused({ kind: 'classification', output: 'nope' }, classifier)).toMatch(
      /task\.output: the model has no output nope \(outputs: logits, features\)/,
    );
    expect(createTaskAdapter({}, classifier).kind).toBe('raw');
  });
});

describe('classification adapter', () => {
  const signature: Signature = {
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }],
    outputs: [{ name: 'logits', datatype: 'FP32', shape: [-1, 2] }],
    batched: true,
  };

  it('applies softmax to logits and keeps rows that are distributions (auto)', () => {
    const task = createTaskAdapter({}, signature);
    expect(task.kind).toBe('classification');
    const [logits, distribution] = task.fromModel(
      { logits: f32([2, 2], [0, Math.log(3), 0.25, 0.75]) },
      2,
    );
    // softmax([0, ln 3]) = [1/4, 3/4]
    expect(Array.from((logits as { probabilities: Float32Array }).probabilities)).toEqual([
      expect.closeTo(0.25, 6),
      expect.closeTo(0.75, 6),
    ]);
    expect(Array.from((distribution as { probabilities: Float32Array }).probabilities)).toEqual([
      0.25, 0.75,
    ]);
    const tensors = task.toTensors([logits!, distribution!]);
    expect(Array.from(tensors['label']!.data as Int32Array)).toEqual([1, 1]);
  });
});
