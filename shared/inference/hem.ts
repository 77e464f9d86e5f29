/**
 * Hard-example mining (HEM): from what the edge model produced, decide whether an input goes on to
 * the cloud worker. The miners keep the names, parameters, defaults and comparison directions of
 * KubeEdge Sedna's filters (kubeedge/sedna, lib/sedna/algorithms/hard_example_mining/
 * hard_example_mining.py), so a Sedna configuration means the same thing here; where Sedna crashes
 * or silently misreads its input we deviate, and docs/hard-example-mining.md lists every case.
 *
 * Every deterministic miner is a step function of its `hardness`: it is hard exactly when hardness
 * clears a cut derived from its parameters. A sweep over logged hardness values therefore predicts
 * what `isHard` would have decided, and a budget can rank inputs by the same number.
 */
// The one list of miners, the CRD's: what a resource may name is what is implemented here.
import { hemNames } from '../crds/schemas.js';
import type { HemName } from '../crds/index.js';
import { ValidationError } from '../errors/index.js';
// mulberry32, the generator the trainer seeds with too.
import { seededRandom } from '../random/index.js';

/** What the edge model produced for one input. */
type EdgeOutput =
  /** One row of class probabilities (sums to about 1; rescaled when it does not). */
  | { kind: 'classification'; probabilities: ArrayLike<number> }
  /**
   * The boxes a detector kept, each with its confidence and, when the model gives them, its
   * per-class scores; may be empty.
   */
  | {
      kind: 'detection';
      boxes: ReadonlyArray<{ score: number; classScores?: ArrayLike<number> }>;
    };

/** Each miner reads only its own fields (see `defaultParameters`); all but `seed` lie in [0, 1]. */
interface HemParameters {
  /** Threshold: hard when the confidence is below it. CrossEntropy: when 1 - normalized entropy is. */
  threshold?: number;
  /** IBT: the image is easy only when more than this share of its boxes are confident. */
  thresholdImg?: number;
  /** IBT: a box whose score is at most this is a low-confidence box. */
  thresholdBox?: number;
  /** Random: the share of inputs sent to the cloud. */
  ratio?: number;
  /** Margin: hard when top-1 minus top-2 probability is below it. */
  margin?: number;
  /** Random: seed of the instance's own pseudo-random stream (integer in [0, 2^32)). */
  seed?: number;
}

interface HardExampleMiner {
  readonly name: HemName;
  /** True when the input should go to the cloud. Pure apart from Random's seeded stream. */
  isHard(output: EdgeOutput): boolean;
  /**
   * In [0, 1], higher = harder, for threshold sweeps and budget mode. Random has no such score and
   * answers 0.5 for everything; EdgeOnly answers 0 and CloudOnly 1.
   */
  hardness(output: EdgeOutput): number;
}

/**
 * Scores within this distance of a cut count as on it. Parameters are written as decimals while
 * the arithmetic is binary (1 - 0.7 is 0.30000000000000004, 0.7 - 0.2 is 0.49999999999999994), so
 * without slack an input lying exactly on a threshold on paper would fall to either side by
 * rounding. Model outputs carry float32 precision (~1e-7): nothing real is decided below 1e-9.
 */
const TIE_TOLERANCE = 1e-9;

const MAX_SEED = 0xffffffff;

/** Sedna's defaults; Margin and the seed are ours. */
const defaults: Readonly<Required<HemParameters>> = {
  threshold: 0.5,
  thresholdImg: 0.5,
  thresholdBox: 0.5,
  ratio: 0.3,
  margin: 0.2,
  seed: 0x5eed,
};

const usedParameters: Readonly<Record<HemName, ReadonlyArray<keyof HemParameters>>> = {
  IBT: ['thresholdImg', 'thresholdBox'],
  Threshold: ['threshold'],
  CrossEntropy: ['threshold'],
  Random: ['ratio', 'seed'],
  EdgeOnly: [],
  CloudOnly: [],
  Margin: ['margin'],
};

/** Sedna's keys (snake_case, as in a CRD's `parameters` list) and the field each one sets. */
const sednaKeys: Readonly<Record<HemName, ReadonlyArray<readonly [string, keyof HemParameters]>>> =
  {
    IBT: [
      ['threshold_img', 'thresholdImg'],
      ['threshold_box', 'thresholdBox'],
    ],
    Threshold: [['threshold', 'threshold']],
    // Sedna reads only threshold_cross_entropy; `threshold` is accepted too, but not both at once.
    CrossEntropy: [
      ['threshold_cross_entropy', 'threshold'],
      ['threshold', 'threshold'],
    ],
    Random: [
      ['random_ratio', 'ratio'],
      ['seed', 'seed'],
    ],
    EdgeOnly: [],
    CloudOnly: [],
    Margin: [['margin', 'margin']],
  };

const unitKeys = ['threshold', 'thresholdImg', 'thresholdBox', 'ratio', 'margin'] as const;

function assertHemName(name: string): asserts name is HemName {
  if (!(hemNames as readonly string[]).includes(name)) {
    throw new ValidationError(`name: expected one of ${hemNames.join(', ')}, got ${show(name)}`);
  }
}

/** The parameters `name` reads, with their defaults. */
function defaultParameters(name: HemName): HemParameters {
  assertHemName(name);
  const out: HemParameters = {};
  for (const key of usedParameters[name]) out[key] = defaults[key];
  return out;
}

/** A bad value as the message shows it: numbers bare (NaN, Infinity), anything else as JSON. */
function show(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  try {
    // undefined, functions and symbols have no JSON form: their type is the useful part.
    const json: string | undefined = JSON.stringify(value);
    return json ?? typeof value;
  } catch {
    return typeof value;
  }
}

function isUnit(value: unknown): value is number {
  return typeof value === 'number' && value >= 0 && value <= 1;
}

function isSeed(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_SEED;
}

/** Every given value is checked, used or not: a bad number anywhere is a configuration bug. */
function checkParameters(parameters: HemParameters): void {
  for (const key of unitKeys) {
    const value: unknown = parameters[key];
    if (value !== undefined && !isUnit(value)) {
      throw new ValidationError(`${key}: expected a number in [0, 1], got ${show(value)}`);
    }
  }
  const seed: unknown = parameters.seed;
  if (seed !== undefined && !isSeed(seed)) {
    throw new ValidationError(`seed: expected an integer in [0, ${MAX_SEED}], got ${show(seed)}`);
  }
}

function kindOf(output: EdgeOutput): string {
  return show((output as { kind?: unknown } | null | undefined)?.kind);
}

/**
 * The probability row rescaled to sum to 1. Entries outside [0, 1] are rejected rather than
 * ignored (Sedna silently calls such an input easy): they mean logits or a broken model, and the
 * caller must hear about it.
 */
function distribution(output: EdgeOutput, miner: HemName): number[] {
  if (output.kind !== 'classification') {
    throw new ValidationError(`${miner} needs classification output, got kind ${kindOf(output)}`);
  }
  return rescaled(output.probabilities, 'probabilities');
}

/** A row of scores in [0, 1] rescaled to sum to 1; `where` names it in errors. */
function rescaled(probabilities: ArrayLike<number>, where: string): number[] {
  const n = probabilities.length;
  if (!(n >= 1)) throw new ValidationError(`${where}: expected at least one class`);
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const p = probabilities[i];
    if (!isUnit(p)) {
      throw new ValidationError(`${where}[${i}]: expected a probability in [0, 1], got ${show(p)}`);
    }
    sum += p;
  }
  if (sum === 0) throw new ValidationError(`${where}: all zero, no class to rank`);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = (probabilities[i] ?? 0) / sum;
  return out;
}

/**
 * Each box's class distribution, for the miners Sedna defines on class scores (CrossEntropy)
 * and ours (Margin): the per-class scores when the detector gives them, else the box's own
 * object/not-object pair [score, 1 - score].
 */
function boxDistributions(output: EdgeOutput, miner: HemName): number[][] {
  const scores = boxScores(output, miner);
  const boxes = (output as Extract<EdgeOutput, { kind: 'detection' }>).boxes;
  return scores.map((score, i) => {
    const classes = boxes[i]?.classScores;
    return classes === undefined
      ? [score, 1 - score]
      : rescaled(classes, `boxes[${i}].classScores`);
  });
}

/**
 * A class-score miner's hardness for either output kind: the row's own for a classification,
 * the hardest box's for a detection (an image is as uncertain as its least certain object), and
 * 1 for a detection with no boxes, as for IBT.
 */
function perBox(miner: HemName, ofRow: (p: readonly number[]) => number) {
  return (output: EdgeOutput): number => {
    if (output.kind !== 'detection') return ofRow(distribution(output, miner));
    const rows = boxDistributions(output, miner);
    if (rows.length === 0) return 1;
    let hardest = 0;
    for (const row of rows) hardest = Math.max(hardest, ofRow(row));
    return hardest;
  };
}

function boxScores(output: EdgeOutput, miner: HemName): number[] {
  if (output.kind !== 'detection') {
    throw new ValidationError(`${miner} needs detection output, got kind ${kindOf(output)}`);
  }
  const { boxes } = output;
  if (!Array.isArray(boxes)) throw new ValidationError('boxes: expected an array');
  const scores = new Array<number>(boxes.length);
  for (let i = 0; i < boxes.length; i++) {
    const score: unknown = (boxes[i] as { score?: unknown } | undefined)?.score;
    if (!isUnit(score)) {
      throw new ValidationError(
        `boxes[${i}].score: expected a score in [0, 1], got ${show(score)}`,
      );
    }
    scores[i] = score;
  }
  return scores;
}

/** Miners that ignore the content still reject malformed output, so every miner fails alike. */
function checkOutput(output: EdgeOutput, miner: HemName): void {
  const kind: unknown = (output as { kind?: unknown } | null | undefined)?.kind;
  if (kind === 'classification') distribution(output, miner);
  else if (kind === 'detection') boxScores(output, miner);
  else {
    throw new ValidationError(
      `kind: expected "classification" or "detection", got ${kindOf(output)}`,
    );
  }
}

function clampUnit(value: number): number {
  return Math.min(1, Math.max(0, value));
}

/**
 * Sedna compares a confidence against the threshold (`confidence < threshold`). We compare
 * 1 - confidence against 1 - threshold instead: the same order, but it makes the decision a
 * function of the hardness alone, which sweeps and budget mode rely on.
 */
function belowCut(
  name: HemName,
  hardness: (output: EdgeOutput) => number,
  threshold: number,
): HardExampleMiner {
  const cut = 1 - threshold;
  return { name, hardness, isHard: (output) => hardness(output) > cut + TIE_TOLERANCE };
}

function thresholdMiner(threshold: number): HardExampleMiner {
  // Sedna's Threshold averages detection box scores; a class row's confidence is its top-1.
  const confidence = (output: EdgeOutput): number => {
    if (output.kind === 'detection') {
      const scores = boxScores(output, 'Threshold');
      // No boxes: nothing the edge trusts, as for IBT. Sedna returns "not hard" here.
      if (scores.length === 0) return 0;
      let sum = 0;
      for (const score of scores) sum += score;
      return sum / scores.length;
    }
    let top = 0;
    for (const q of distribution(output, 'Threshold')) if (q > top) top = q;
    return top;
  };
  return belowCut('Threshold', (output) => clampUnit(1 - confidence(output)), threshold);
}

/**
 * Normalized entropy H(p) / ln N. A zero probability contributes nothing (the limit of p ln p;
 * Sedna's math.log(0) raises), and a single class is certain (Sedna divides by ln 1 = 0).
 */
function normalizedEntropy(p: readonly number[]): number {
  if (p.length === 1) return 0;
  let entropy = 0;
  for (const q of p) if (q > 0) entropy -= q * Math.log(q);
  return clampUnit(entropy / Math.log(p.length));
}

function marginHardness(p: readonly number[]): number {
  let top1 = 0;
  let top2 = 0;
  for (const q of p) {
    if (q > top1) {
      top2 = top1;
      top1 = q;
    } else if (q > top2) top2 = q;
  }
  return clampUnit(1 - (top1 - top2));
}

function ibtMiner(thresholdImg: number, thresholdBox: number): HardExampleMiner {
  const hardness = (output: EdgeOutput): number => {
    const scores = boxScores(output, 'IBT');
    // No boxes: the edge saw nothing it trusts, so the cloud should look (Sedna: "not hard").
    if (scores.length === 0) return 1;
    let low = 0;
    for (const score of scores) if (score <= thresholdBox + TIE_TOLERANCE) low++;
    return low / scores.length;
  };
  // Sedna: hard when share_low >= 1 - threshold_img (inclusive).
  const cut = 1 - thresholdImg;
  return { name: 'IBT', hardness, isHard: (output) => hardness(output) >= cut - TIE_TOLERANCE };
}

function randomMiner(ratio: number, seed: number): HardExampleMiner {
  // Per instance, so two miners (or two tests) never perturb each other's sequence.
  const next = seededRandom(seed);
  return {
    name: 'Random',
    isHard(output) {
      checkOutput(output, 'Random');
      // Sedna: random.uniform(0, 1) < random_ratio; draws lie in [0, 1), so ratio 1 is "always".
      return next() < ratio;
    },
    hardness(output) {
      checkOutput(output, 'Random');
      return 0.5;
    },
  };
}

function constantMiner(name: 'EdgeOnly' | 'CloudOnly'): HardExampleMiner {
  const hard = name === 'CloudOnly';
  return {
    name,
    isHard(output) {
      checkOutput(output, name);
      return hard;
    },
    hardness(output) {
      checkOutput(output, name);
      return hard ? 1 : 0;
    },
  };
}

/** Builds a miner; throws a ValidationError naming the first parameter out of range. */
function createMiner(name: HemName, parameters: HemParameters = {}): HardExampleMiner {
  assertHemName(name);
  checkParameters(parameters);
  const value = (key: keyof HemParameters): number => parameters[key] ?? defaults[key];
  switch (name) {
    case 'IBT':
      return ibtMiner(value('thresholdImg'), value('thresholdBox'));
    case 'Threshold':
      return thresholdMiner(value('threshold'));
    case 'CrossEntropy':
      // Sedna: hard when 1 - normalized entropy < threshold_cross_entropy.
      return belowCut(
        'CrossEntropy',
        perBox('CrossEntropy', normalizedEntropy),
        value('threshold'),
      );
    case 'Margin':
      return belowCut('Margin', perBox('Margin', marginHardness), value('margin'));
    case 'Random':
      return randomMiner(value('ratio'), value('seed'));
    case 'EdgeOnly':
    case 'CloudOnly':
      return constantMiner(name);
  }
}

/** Plain decimals only: Number() would take "", "0x1" and "Infinity", Python's float() "nan". */
const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

function parseUnit(key: string, raw: unknown): number {
  const text = typeof raw === 'string' ? raw.trim() : '';
  const value = DECIMAL.test(text) ? Number(text) : Number.NaN;
  if (!isUnit(value)) {
    throw new ValidationError(`${key}: expected a number in [0, 1], got ${show(raw)}`);
  }
  return value;
}

function parseSeed(key: string, raw: unknown): number {
  const text = typeof raw === 'string' ? raw.trim() : '';
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!isSeed(value)) {
    throw new ValidationError(`${key}: expected an integer in [0, ${MAX_SEED}], got ${show(raw)}`);
  }
  return value;
}

type ParameterPairs =
  ReadonlyArray<{ key: string; value: string }> | Readonly<Record<string, string>>;

function isPairList(pairs: ParameterPairs): pairs is ReadonlyArray<{ key: string; value: string }> {
  return Array.isArray(pairs);
}

/**
 * Reads Sedna-style string parameters (a CRD's `parameters: [{key, value}]`, or a plain record)
 * for miner `name`. Keys the miner does not read are left alone: they belong to the worker.
 * A key given twice, or two keys for the same field, is an error rather than last-one-wins.
 */
function parseHemParameters(name: HemName, pairs: ParameterPairs): HemParameters {
  assertHemName(name);
  const entries: ReadonlyArray<readonly [string, unknown]> = isPairList(pairs)
    ? pairs.map((pair) => [pair.key, pair.value] as const)
    : Object.entries(pairs);
  const fieldOf = new Map(sednaKeys[name]);
  const setBy = new Map<keyof HemParameters, string>();
  const out: HemParameters = {};
  for (const [key, raw] of entries) {
    const field = fieldOf.get(key);
    if (field === undefined) continue;
    const earlier = setBy.get(field);
    if (earlier !== undefined) {
      throw new ValidationError(
        earlier === key ? `${key}: given more than once` : `${key}: conflicts with ${earlier}`,
      );
    }
    setBy.set(field, key);
    out[field] = field === 'seed' ? parseSeed(key, raw) : parseUnit(key, raw);
  }
  return out;
}

export { createMiner, defaultParameters, parseHemParameters };
export type { EdgeOutput, HemParameters, HardExampleMiner };
