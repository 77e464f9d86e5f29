/**
 * Outlier scores on the serving path: the score is the documented formula, any numeric
 * datatype reads the same, the committed references parse and fit the committed models'
 * inputs, and a wrong input or a bad reference field is a ValidationError naming it. Also the
 * cost per 784-pixel input.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { openOnnxModel } from '../../../shared/inference/onnx-runtime.js';
import {
  createOutlierScorer,
  driftReferenceSchema,
  parseDriftReference,
} from '../../../shared/inference/outlier.js';
import type { DriftReference } from '../../../shared/inference/outlier.js';
import { toHalf } from '../../../shared/inference/tensor.js';
import type { TensorSpec } from '../../../shared/inference/tensor.js';

const models = new URL('../../../models/', import.meta.url);
const json = (file: string): unknown => JSON.parse(readFileSync(new URL(file, models), 'utf8'));

/**
 * A reference small enough to score by hand: 2x2 images pooled to 2x1 (stride 2 across), two
 * features, one component along the first.
 */
const tiny: DriftReference = {
  version: 1,
  input: 'x',
  shape: [1, 2, 2],
  pooling: { kind: 'grid', channels: 1, height: 2, width: 2, strideY: 1, strideX: 2 },
  samples: 10,
  mean: [0.5, 0.25],
  scale: [2, 0.5],
  components: [[1, 0]],
  eigenvalues: [4],
  residualScale: 0.5,
  residualWeight: 3,
  quantiles: { samples: 10, mean: 1, std: 1, p50: 1, p90: 2, p95: 3, p99: 4 },
};
const tinySpec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 1, 2, 2] };

/** The error `fn` throws, which must be a ValidationError. */
function validationError(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('createOutlierScorer', () => {
  it('scores T^2 plus the weighted residual of the pooled, standardized input', () => {
    const scorer = createOutlierScorer(tiny, tinySpec);
    // Row 1: pixels [1, 3; 0, 2] pool to [2, 1]; standardized [(2 - 0.5) / 2, (1 - 0.25) / 0.5]
    // = [0.75, 1.5]. T^2 = 0.75^2 / 4; residual 1.5^2 = 2.25, weighted 3 / 0.5.
    // Row 2: the mean itself scores 0.
    const data = Float32Array.from([1, 3, 0, 2, 0.5, 0.5, 0.25, 0.25]);
    const scores = scorer.score({ datatype: 'FP32', shape: [2, 1, 2, 2], data }, 2);
    expect(scores[0]).toBeCloseTo(0.75 ** 2 / 4 + (3 / 0.5) * 2.25, 10);
    expect(scores[1]).toBeCloseTo(0, 10);
    expect(scorer.reference).toBe(tiny);
  });

  it('reads every numeric datatype as the same numbers', () => {
    const scorer = createOutlierScorer(tiny, tinySpec);
    const values = [1, 3, 0, 2];
    const shape = [1, 1, 2, 2];
    const expected = scorer.score({ datatype: 'FP32', shape, data: Float32Array.from(values) }, 1);
    for (const tensor of [
      { datatype: 'FP64' as const, shape, data: Float64Array.from(values) },
      { datatype: 'UINT8' as const, shape, data: Uint8Array.from(values) },
      { datatype: 'INT64' as const, shape, data: BigInt64Array.from(values.map(BigInt)) },
      { datatype: 'FP16' as const, shape, data: Uint16Array.from(values.map(toHalf)) },
    ]) {
      expect(scorer.score(tensor, 1)[0], tensor.datatype).toBeCloseTo(expected[0]!, 10);
    }
  });

  it('refuses a model input of another name, datatype or shape, naming it', () => {
    expect(
      validationError(() => createOutlierScorer(tiny, { ...tinySpec, name: 'y' })).message,
    ).toBe('input y: the drift reference was fitted for input x');
    expect(
      validationError(() => createOutlierScorer(tiny, { ...tinySpec, datatype: 'BYTES' })).message,
    ).toMatch(/^input x: a BYTES input/);
    for (const shape of [
      [-1, 1, 2, 3],
      [-1, 4],
      [1, 2, 2],
    ]) {
      expect(validationError(() => createOutlierScorer(tiny, { ...tinySpec, shape })).message).toBe(
        `input x: shape ${JSON.stringify(shape)} does not fit the drift reference's [batch, 1, 2, 2]`,
      );
    }
    // Open dimensions fit any size; the request's own shape is checked when scoring.
    expect(() => createOutlierScorer(tiny, { ...tinySpec, shape: [-1, -1, 2, -1] })).not.toThrow();
  });

  it('refuses a batch of the wrong shape or a string tensor, naming the input', () => {
    const scorer = createOutlierScorer(tiny, { ...tinySpec, shape: [-1, -1, 2, -1] });
    const wrong = { datatype: 'FP32' as const, shape: [1, 1, 2, 3], data: new Float32Array(6) };
    expect(validationError(() => scorer.score(wrong, 1)).message).toBe(
      'input x: shape [1,1,2,3], expected [1,1,2,2] for the drift reference',
    );
    // The first rows of a batch may be scored (a sample), not more rows than it has.
    const rows = { datatype: 'FP32' as const, shape: [2, 1, 2, 2], data: new Float32Array(8) };
    expect(scorer.score(rows, 1)).toHaveLength(1);
    expect(validationError(() => scorer.score(rows, 3)).message).toMatch(/expected \[3,1,2,2\]/);
    const text = { datatype: 'BYTES' as const, shape: [1, 1, 2, 2], data: ['a', 'b', 'c', 'd'] };
    expect(() => scorer.score(text, 1)).toThrow(ValidationError);
  });

  it('costs a few microseconds per 784-pixel input', () => {
    const reference = parseDriftReference(json('edge.drift.json'));
    const scorer = createOutlierScorer(reference, {
      name: 'input',
      datatype: 'FP32',
      shape: [-1, 784],
    });
    const rows = 64;
    const data = new Float32Array(rows * 784).map((_, i) => ((i * 7919) % 256) / 255);
    const tensor = { datatype: 'FP32' as const, shape: [rows, 784], data };
    // Warm up to the optimized code, as a server runs it.
    for (let i = 0; i < 200; i += 1) scorer.score(tensor, rows);
    let best = Infinity;
    for (let round = 0; round < 5; round += 1) {
      const started = process.cpuUsage();
      for (let i = 0; i < 20; i += 1) scorer.score(tensor, rows);
      const used = process.cpuUsage(started);
      best = Math.min(best, (used.user + used.system) / (20 * rows));
    }
    console.log(`outlier score: ${best.toFixed(2)} us CPU per 784-pixel input`);
    // About 6 us on the 2-core development machine under load; the bound only catches a blunder.
    expect(best).toBeLessThan(30);
  });
});

describe('parseDriftReference', () => {
  it('names the bad field', () => {
    const cases: Array<[Partial<Record<keyof DriftReference, unknown>>, RegExp]> = [
      [{ version: 2 }, /^drift reference version: /],
      [{ input: '' }, /^drift reference input: /],
      [{ eigenvalues: [-1] }, /^drift reference eigenvalues\[0\]: expected a number > 0/],
      [{ eigenvalues: [1, 2] }, /^drift reference eigenvalues: expected 1 values/],
      [{ components: [[1, 0, 0]] }, /^drift reference components\[0\]: expected 2 values/],
      [{ mean: [0.5] }, /^drift reference mean: expected 2 values/],
      [{ scale: [1, 0] }, /^drift reference scale\[1\]: expected a number > 0/],
      [{ shape: [1, 2, 3] }, /^drift reference pooling: reads 4 values per input/],
      [{ pooling: { kind: 'square' } }, /^drift reference pooling\.kind: /],
      [{ quantiles: { ...tiny.quantiles, p95: 'high' } }, /^drift reference quantiles\.p95: /],
      [{ residualScale: Number.NaN }, /^drift reference residualScale: /],
    ];
    for (const [change, message] of cases) {
      expect(validationError(() => parseDriftReference({ ...tiny, ...change })).message).toMatch(
        message,
      );
    }
    expect(validationError(() => parseDriftReference(null)).message).toMatch(/^drift reference: /);
    expect(parseDriftReference(tiny)).toEqual(tiny);
  });
});

describe('the committed drift references', () => {
  it.each([
    ['edge.drift.json', ['edge.onnx', 'cloud.onnx']],
    ['detector-edge.drift.json', ['detector-edge.onnx', 'detector-cloud.onnx']],
  ])('%s parses and fits the inputs of %s', async (file, onnx) => {
    const reference = parseDriftReference(json(file));
    expect(driftReferenceSchema.safeParse(json(file)).success).toBe(true);
    expect(reference.components.length).toBeGreaterThanOrEqual(16);
    expect(reference.components.length).toBeLessThanOrEqual(32);
    expect(reference.quantiles.p95).toBeGreaterThan(reference.quantiles.p50);
    expect(readFileSync(new URL(file, models)).length).toBeLessThan(300_000);
    for (const name of onnx) {
      const model = await openOnnxModel(new Uint8Array(readFileSync(new URL(name, models))));
      await model.close();
      const [input] = model.signature.inputs;
      const scorer = createOutlierScorer(reference, input!);
      const rows = 3;
      const per = reference.shape.reduce((a, b) => a * b, 1);
      const scores = scorer.score(
        { datatype: 'FP32', shape: [rows, ...reference.shape], data: new Float32Array(rows * per) },
        rows,
      );
      expect(scores.every(Number.isFinite)).toBe(true);
    }
  });
});
