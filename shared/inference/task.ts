/**
 * Task adapters: what a model's outputs mean, per sample, for hard-example mining and for merging
 * the edge's and the cloud's answers. A model's raw outputs differ from model to model (a
 * classifier's logits or probabilities, a detector's boxes in one of four layouts, with or
 * without its own NMS); the adapter turns them into one task view, and back into the task's
 * output tensors, which the edge and the cloud worker both answer with:
 * - classification: `probabilities` FP32 [N, C] and `label` INT32 [N];
 * - detection: `detections` FP32 [N, K, 6] (x1, y1, x2, y2, score, class: Sedna's box layout),
 *   padded to the batch's largest K, and `num_detections` INT32 [N];
 * - raw: the model's own outputs, for models no miner reads (input-only miners still apply).
 */
import { task as taskSchema } from '../crds/schemas.js';
import type { TaskSpec } from '../crds/index.js';
import { ConfigError, ValidationError } from '../errors/index.js';
import { describeIssues } from '../schema/index.js';
import type { EdgeOutput } from './hem.js';
import { nonMaxSuppression } from './nms.js';
import { concatRows, elementCount, numbersOf, sliceRows } from './tensor.js';
import type { Signature, Tensor, TensorSpec } from './tensor.js';

/** One detected object: corners in the model's coordinates, its score, class and distribution. */
interface Detection {
  box: readonly [number, number, number, number];
  score: number;
  cls: number;
  /** Per-class scores when the model gives them (CrossEntropy and Margin read them). */
  classScores?: ArrayLike<number>;
}

/** One sample's answer in the task's terms. */
type TaskResult =
  | { kind: 'classification'; probabilities: Float32Array }
  | { kind: 'detection'; detections: readonly Detection[] }
  | { kind: 'raw'; tensors: Readonly<Record<string, Tensor>> };

interface TaskAdapter {
  readonly kind: TaskResult['kind'];
  /** The task's output tensors, as the model metadata lists them. */
  readonly outputs: readonly TensorSpec[];
  /** Per-sample results from the model's own outputs. */
  fromModel(raw: Readonly<Record<string, Tensor>>, rows: number): TaskResult[];
  /** Per-sample results from the task outputs another worker answered with. */
  fromTask(tensors: Readonly<Record<string, Tensor>>, rows: number): TaskResult[];
  /** The task's output tensors for these results (one per sample, in order). */
  toTensors(results: readonly TaskResult[]): Record<string, Tensor>;
  /** What a hard-example miner reads from one result. */
  minerInput(result: TaskResult): EdgeOutput;
}

type ResolvedDetection = Required<
  Pick<
    TaskSpec,
    'boxes' | 'boxFormat' | 'scoreFloor' | 'nmsThreshold' | 'agnosticNms' | 'maxDetections'
  >
> &
  Pick<TaskSpec, 'scores' | 'classes' | 'count'> & { nms: boolean };

/** Output names `auto` recognises, as common exporters write them. */
const known = {
  boxes: ['boxes', 'detection_boxes', 'bboxes', 'pred_boxes'],
  scores: ['scores', 'detection_scores', 'confidences'],
  classes: ['class_scores', 'class_probs', 'classes', 'labels', 'detection_classes'],
  count: ['num_detections', 'num_dets', 'valid_detections'],
} as const;

const isFloat = (spec: TensorSpec) => spec.datatype.startsWith('FP');

function output(signature: Signature, name: string, field: string): TensorSpec {
  const spec = signature.outputs.find((s) => s.name === name);
  if (spec === undefined) {
    throw new ConfigError(
      `task.${field}: the model has no output ${name} (outputs: ${signature.outputs.map((s) => s.name).join(', ')})`,
    );
  }
  return spec;
}

const firstKnown = (signature: Signature, names: readonly string[]) =>
  names.find((name) => signature.outputs.some((s) => s.name === name));

/** The tensor named `name` in `tensors`, or a 502-class problem with the answer. */
function take(tensors: Readonly<Record<string, Tensor>>, name: string): Tensor {
  const tensor = tensors[name];
  if (tensor === undefined) throw new ValidationError(`the answer has no output ${name}`);
  return tensor;
}

/**
 * Per-row element count: a batched tensor's rows, or the whole tensor as one sample when the
 * model has no batch dimension (rows is then 1 and the rank is one less).
 */
function perRow(tensor: Tensor, rows: number, rank: number, name: string): number {
  const batched = tensor.shape.length === rank && tensor.shape[0] === rows;
  const single = rows === 1 && tensor.shape.length === rank - 1;
  if (!batched && !single) {
    throw new ValidationError(
      `output ${name} has shape ${JSON.stringify(tensor.shape)}: expected rank ${rank} with ${rows} rows`,
    );
  }
  return rows === 0 ? 0 : elementCount(tensor.shape) / rows;
}

/**
 * `make(row)` for each row, in order. A loop, not `Array.from({ length: rows }, make)`, which
 * walks its array-like source generically: ~2.8 us for 64 rows in V8 against ~0.2 us for this,
 * and it runs for every request.
 */
function eachRow<T>(rows: number, make: (row: number) => T): T[] {
  const out = new Array<T>(rows);
  for (let row = 0; row < rows; row += 1) out[row] = make(row);
  return out;
}

/** The row as probabilities, in place (`out` is the caller's own copy). */
function softmaxRow(out: Float32Array, mode: 'auto' | 'always' | 'never'): Float32Array {
  if (mode === 'never') return out;
  if (mode === 'auto') {
    let sum = 0;
    let inUnit = true;
    for (let k = 0; k < out.length; k += 1) {
      const v = out[k]!;
      sum += v;
      if (!(v >= 0 && v <= 1)) inUnit = false;
    }
    if (inUnit && Math.abs(sum - 1) < 1e-3) return out;
  }
  let max = -Infinity;
  for (let k = 0; k < out.length; k += 1) if (out[k]! > max) max = out[k]!;
  let total = 0;
  for (let k = 0; k < out.length; k += 1) {
    out[k] = Math.exp(out[k]! - max);
    total += out[k]!;
  }
  for (let k = 0; k < out.length; k += 1) out[k]! /= total;
  return out;
}

function argmax(p: ArrayLike<number>): number {
  let best = 0;
  for (let k = 1; k < p.length; k += 1) if (p[k]! > p[best]!) best = k;
  return best;
}

function classificationAdapter(
  name: string,
  classes: number,
  mode: 'auto' | 'always' | 'never',
): TaskAdapter {
  const rowsOf = (tensor: Tensor, rows: number, softmax: typeof mode): TaskResult[] => {
    const width = perRow(tensor, rows, 2, name);
    // One float32 copy of the whole output, rows as views into it: this runs for every sample.
    const values = Float32Array.from(numbersOf(tensor));
    return eachRow(rows, (i) => ({
      kind: 'classification' as const,
      probabilities: softmaxRow(values.subarray(i * width, (i + 1) * width), softmax),
    }));
  };
  return {
    kind: 'classification',
    outputs: [
      { name: 'probabilities', datatype: 'FP32', shape: [-1, classes] },
      { name: 'label', datatype: 'INT32', shape: [-1] },
    ],
    fromModel: (raw, rows) => rowsOf(take(raw, name), rows, mode),
    fromTask: (tensors, rows) => rowsOf(take(tensors, 'probabilities'), rows, 'never'),
    toTensors(results) {
      const n = results.length;
      const width =
        n === 0 ? 0 : (results[0] as { probabilities: Float32Array }).probabilities.length;
      const probabilities = new Float32Array(n * width);
      const label = new Int32Array(n);
      results.forEach((r, i) => {
        const p = (r as { probabilities: Float32Array }).probabilities;
        probabilities.set(p, i * width);
        label[i] = argmax(p);
      });
      return {
        probabilities: { datatype: 'FP32', shape: [n, width], data: probabilities },
        label: { datatype: 'INT32', shape: [n], data: label },
      };
    },
    minerInput: (r) => ({
      kind: 'classification',
      probabilities: (r as { probabilities: Float32Array }).probabilities,
    }),
  };
}

/** A box in the model's layout as corners. */
function corners(
  format: ResolvedDetection['boxFormat'],
  b: ArrayLike<number>,
  at: number,
): [number, number, number, number] {
  const [a, c, d, e] = [b[at]!, b[at + 1]!, b[at + 2]!, b[at + 3]!];
  switch (format) {
    case 'xyxy':
      return [a, c, d, e];
    case 'yxyx':
      return [c, a, e, d];
    case 'xywh':
      return [a, c, a + d, c + e];
    case 'cxcywh':
      return [a - d / 2, c - e / 2, a + d / 2, c + e / 2];
  }
}

/** A batch's detection outputs, read and checked once for all its rows. */
interface DetectionColumns {
  /** Candidate boxes per row. */
  candidates: number;
  boxes: ArrayLike<number>;
  scores: ArrayLike<number> | undefined;
  classValues: ArrayLike<number> | undefined;
  /** Scores per box when `classValues` is a distribution; 0 when it holds class indices. */
  classWidth: number;
  counts: ArrayLike<number> | undefined;
}

function detectionColumns(
  config: ResolvedDetection,
  raw: Readonly<Record<string, Tensor>>,
  rows: number,
): DetectionColumns {
  const boxesTensor = take(raw, config.boxes);
  const candidates = perRow(boxesTensor, rows, 3, config.boxes) / 4;
  const scoresTensor = config.scores === undefined ? undefined : take(raw, config.scores);
  if (scoresTensor !== undefined && perRow(scoresTensor, rows, 2, config.scores!) !== candidates) {
    throw new ValidationError(`output ${config.scores}: not one score per box of ${config.boxes}`);
  }
  const classTensor = config.classes === undefined ? undefined : take(raw, config.classes);
  let classWidth = 0;
  if (classTensor !== undefined) {
    const distribution = classTensor.shape.length === boxesTensor.shape.length;
    const per = perRow(classTensor, rows, distribution ? 3 : 2, config.classes!);
    classWidth = distribution ? per / candidates : 0;
  }
  return {
    candidates,
    boxes: numbersOf(boxesTensor),
    scores: scoresTensor === undefined ? undefined : numbersOf(scoresTensor),
    classValues: classTensor === undefined ? undefined : numbersOf(classTensor),
    classWidth,
    counts: config.count === undefined ? undefined : numbersOf(take(raw, config.count)),
  };
}

/** Candidate `index` (across the batch) as a detection, or undefined under the score floor. */
function candidate(
  config: ResolvedDetection,
  columns: DetectionColumns,
  index: number,
): Detection | undefined {
  const { classValues, classWidth, scores } = columns;
  let cls = 0;
  let top = 1;
  let classScores: number[] | undefined;
  if (classValues !== undefined && classWidth > 0) {
    classScores = Array.prototype.slice.call(
      classValues,
      index * classWidth,
      (index + 1) * classWidth,
    ) as number[];
    cls = argmax(classScores);
    top = classScores[cls]!;
  } else if (classValues !== undefined) cls = Math.round(classValues[index]!);
  const score = scores !== undefined ? scores[index]! : top;
  if (!(score >= config.scoreFloor)) return undefined;
  return {
    box: corners(config.boxFormat, columns.boxes, index * 4),
    score,
    cls,
    ...(classScores === undefined ? {} : { classScores }),
  };
}

/** One image's candidate boxes, floored, suppressed and capped as configured. */
function detectionsOfRow(
  config: ResolvedDetection,
  columns: DetectionColumns,
  row: number,
): Detection[] {
  const { candidates, counts } = columns;
  const limit =
    counts === undefined ? candidates : Math.min(candidates, Math.max(0, Number(counts[row] ?? 0)));
  const found: Detection[] = [];
  for (let k = 0; k < limit; k += 1) {
    const detection = candidate(config, columns, row * candidates + k);
    if (detection !== undefined) found.push(detection);
  }
  if (!config.nms) return found.sort((a, b) => b.score - a.score).slice(0, config.maxDetections);
  const keep = nonMaxSuppression(
    found.flatMap((d) => [...d.box]),
    found.map((d) => d.score),
    found.map((d) => d.cls),
    {
      iouThreshold: config.nmsThreshold,
      maxDetections: config.maxDetections,
      classAgnostic: config.agnosticNms,
    },
  );
  return keep.map((i) => found[i]!);
}

function detectionAdapter(config: ResolvedDetection): TaskAdapter {
  const detectionsOf = (r: TaskResult) => (r as { detections: readonly Detection[] }).detections;
  return {
    kind: 'detection',
    outputs: [
      { name: 'detections', datatype: 'FP32', shape: [-1, -1, 6] },
      { name: 'num_detections', datatype: 'INT32', shape: [-1] },
    ],
    fromModel(raw, rows) {
      const columns = detectionColumns(config, raw, rows);
      return eachRow(rows, (row) => ({
        kind: 'detection' as const,
        detections: detectionsOfRow(config, columns, row),
      }));
    },
    fromTask(tensors, rows) {
      const table = take(tensors, 'detections');
      const counts = numbersOf(take(tensors, 'num_detections'));
      const per = perRow(table, rows, 3, 'detections');
      const values = numbersOf(table);
      return eachRow(rows, (row) => {
        const n = Math.min(per / 6, Math.max(0, counts[row] ?? 0));
        const detections: Detection[] = [];
        for (let k = 0; k < n; k += 1) {
          const at = row * per + k * 6;
          detections.push({
            box: [values[at]!, values[at + 1]!, values[at + 2]!, values[at + 3]!],
            score: values[at + 4]!,
            cls: values[at + 5]!,
          });
        }
        return { kind: 'detection' as const, detections };
      });
    },
    toTensors(results) {
      const n = results.length;
      const k = results.reduce((m, r) => Math.max(m, detectionsOf(r).length), 0);
      const table = new Float32Array(n * k * 6);
      const counts = new Int32Array(n);
      results.forEach((r, row) => {
        const found = detectionsOf(r);
        counts[row] = found.length;
        found.forEach((d, j) => table.set([...d.box, d.score, d.cls], (row * k + j) * 6));
      });
      return {
        detections: { datatype: 'FP32', shape: [n, k, 6], data: table },
        num_detections: { datatype: 'INT32', shape: [n], data: counts },
      };
    },
    minerInput: (r) => ({
      kind: 'detection',
      boxes: detectionsOf(r).map((d) => ({
        score: d.score,
        ...(d.classScores === undefined ? {} : { classScores: d.classScores }),
      })),
    }),
  };
}

function rawAdapter(signature: Signature): TaskAdapter {
  const rowsOf = (tensors: Readonly<Record<string, Tensor>>, rows: number): TaskResult[] =>
    eachRow(rows, (row) => {
      const own: Record<string, Tensor> = {};
      for (const spec of signature.outputs) {
        const tensor = take(tensors, spec.name);
        own[spec.name] = signature.batched ? sliceRows(tensor, row, row + 1) : tensor;
      }
      return { kind: 'raw' as const, tensors: own };
    });
  return {
    kind: 'raw',
    outputs: signature.outputs,
    fromModel: rowsOf,
    fromTask: rowsOf,
    toTensors(results) {
      const out: Record<string, Tensor> = {};
      for (const spec of signature.outputs) {
        const parts = results.map(
          (r) => (r as { tensors: Record<string, Tensor> }).tensors[spec.name]!,
        );
        out[spec.name] = signature.batched ? concatRows(parts) : parts[0]!;
      }
      return out;
    },
    minerInput() {
      throw new ConfigError(
        'a raw task gives no output a miner can read: use an input-only miner (Random, EdgeOnly, CloudOnly)',
      );
    },
  };
}

/** The detector's outputs: named in the task, or found by the names exporters use. */
function detectionOutputs(spec: TaskSpec, signature: Signature) {
  const boxes = spec.boxes ?? firstKnown(signature, known.boxes);
  if (boxes === undefined)
    throw new ConfigError('task.boxes: the model has no output named like boxes; name it');
  const boxSpec = output(signature, boxes, 'boxes');
  if (boxSpec.shape.at(-1) !== 4 && boxSpec.shape.at(-1) !== -1) {
    throw new ConfigError(
      `task.boxes: output ${boxes} has shape ${JSON.stringify(boxSpec.shape)}, not [N, K, 4]`,
    );
  }
  const found = {
    scores: spec.scores ?? firstKnown(signature, known.scores),
    classes: spec.classes ?? firstKnown(signature, known.classes),
    count: spec.count ?? firstKnown(signature, known.count),
  };
  for (const [field, name] of Object.entries(found)) {
    if (name !== undefined) output(signature, name, field);
  }
  if (found.scores === undefined && found.classes === undefined) {
    throw new ConfigError(
      'task.scores: a detector needs a scores or a classes output to rank its boxes',
    );
  }
  // Only the outputs the model has: the resolved settings keep no undefined keys.
  const present = Object.fromEntries(
    Object.entries(found).filter(([, name]) => name !== undefined),
  );
  return { boxes, ...(present as Pick<TaskSpec, 'scores' | 'classes' | 'count'>) };
}

/** Detection settings with the model's outputs found and every default applied. */
function resolveDetection(
  spec: TaskSpec,
  signature: Signature,
  nmsParameter: number | undefined,
): ResolvedDetection {
  const outputs = detectionOutputs(spec, signature);
  const nms = spec.nms ?? 'auto';
  return {
    ...outputs,
    boxFormat: spec.boxFormat ?? 'xyxy',
    scoreFloor: spec.scoreFloor ?? 0.05,
    // A model that reports a count did its own suppression (the TensorFlow/ONNX NMS layouts).
    nms: nms === 'always' || (nms === 'auto' && outputs.count === undefined),
    nmsThreshold: spec.nmsThreshold ?? nmsParameter ?? 0.5,
    agnosticNms: spec.agnosticNms ?? false,
    maxDetections: spec.maxDetections ?? 100,
  };
}

/** What `auto` makes of a signature. */
function guessKind(signature: Signature): 'raw' | 'classification' | 'detection' {
  if (firstKnown(signature, known.boxes) !== undefined) return 'detection';
  const [only] = signature.outputs;
  if (
    signature.outputs.length === 1 &&
    only !== undefined &&
    isFloat(only) &&
    only.shape.length === 2
  )
    return 'classification';
  return 'raw';
}

/**
 * The adapter for a worker: its task settings, the model's signature and the worker's
 * `nms_threshold` parameter (the seed's sample sets it). A setting that does not fit the model
 * is a ConfigError naming it: the worker stops at start-up instead of answering nonsense.
 */
function createTaskAdapter(
  spec: TaskSpec,
  signature: Signature,
  nmsParameter?: number,
): TaskAdapter {
  const kind = spec.kind === undefined || spec.kind === 'auto' ? guessKind(signature) : spec.kind;
  if (kind === 'raw') return rawAdapter(signature);
  if (kind === 'detection')
    return detectionAdapter(resolveDetection(spec, signature, nmsParameter));
  const name =
    spec.output ?? (signature.outputs.length === 1 ? signature.outputs[0]!.name : undefined);
  if (name === undefined)
    throw new ConfigError(
      'task.output: the model has several outputs; name the one with the class scores',
    );
  const scores = output(signature, name, 'output');
  if (!isFloat(scores) || scores.shape.length !== 2) {
    throw new ConfigError(
      `task.output: ${name} is ${scores.datatype} ${JSON.stringify(scores.shape)}, not floating-point [N, C]`,
    );
  }
  return classificationAdapter(name, scores.shape[1]!, spec.softmax ?? 'auto');
}

/** The TASK variable: the CRD's task object as JSON, read with the CRD's own schema. */
function parseTaskVariable(text: string | undefined): TaskSpec {
  if (text === undefined || text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ConfigError('TASK: not JSON');
  }
  const result = taskSchema.strict().safeParse(parsed);
  if (!result.success) throw new ConfigError(describeIssues(result.error.issues, 'TASK'));
  return result.data;
}

export { createTaskAdapter, parseTaskVariable, argmax };
export type { TaskAdapter, TaskResult, Detection };
