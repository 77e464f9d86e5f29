/**
 * How a dataset is spread over federated clients, seeded so every run builds the same clients:
 * `iid` (a shuffle cut into equal shares), `shards` (McMahan et al. 2017's pathological non-IID
 * split: sorted by label, cut into shards, a few shards per client) and `dirichlet` (Hsu et al.
 * 2019: each label's samples split across clients in proportions drawn from Dirichlet(alpha);
 * small alpha, few labels per client). Gamma draws for the Dirichlet use Marsaglia and Tsang's
 * method on the seeded uniform, so no dependency and no unseeded randomness enters.
 */
import { ValidationError } from '../errors/index.js';
import { normal, seededRandom, shuffle } from '../random/index.js';

/** The partition schemes. */
const partitionKinds = ['iid', 'shards', 'dirichlet'] as const;
type PartitionKind = (typeof partitionKinds)[number];

interface PartitionOptions {
  readonly kind: PartitionKind;
  /** Clients to spread the samples over (1 to the number of samples). */
  readonly clients: number;
  readonly seed: number;
  /** dirichlet: the concentration (> 0, default 0.5); smaller is more skewed. */
  readonly alpha?: number;
  /** shards: shards per client (default 2, as McMahan et al.). */
  readonly shardsPerClient?: number;
  /** dirichlet: redraw (up to 1000 times) until every client has this many samples (default 0). */
  readonly minSamples?: number;
}

/** How many times a Dirichlet partition is redrawn for `minSamples` before giving up. */
const maxDraws = 1000;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const ascending = (a: number, b: number) => a - b;

/** `items` cut into `parts` runs, [n k / parts, n (k + 1) / parts): sizes differ by at most 1. */
function cut<T>(items: readonly T[], parts: number): T[][] {
  const n = items.length;
  return range(parts).map((k) =>
    items.slice(Math.floor((k * n) / parts), Math.floor(((k + 1) * n) / parts)),
  );
}

/**
 * The log of a Gamma(shape, 1) draw (Marsaglia & Tsang 2000; for shape < 1, Gamma(shape + 1)
 * times U^(1/shape)). Logs, because a small shape's draws underflow a double.
 */
function logGamma(shape: number, uniform: () => number, gauss: () => number): number {
  if (shape < 1) return logGamma(shape + 1, uniform, gauss) + Math.log(1 - uniform()) / shape;
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    const x = gauss();
    const t = 1 + c * x;
    if (t <= 0) continue;
    const v = t * t * t;
    const u = 1 - uniform();
    if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) return Math.log(d * v);
  }
}

/** One Gamma(shape, 1) draw from `uniform`. */
function sampleGamma(shape: number, uniform: () => number): number {
  return Math.exp(logGamma(shape, uniform, normal(uniform)));
}

/** A draw from the symmetric Dirichlet(alpha, ..., alpha) over `k` parts: k shares summing to 1. */
function sampleDirichlet(alpha: number, k: number, uniform: () => number): number[] {
  const gauss = normal(uniform);
  const logs = range(k).map(() => logGamma(alpha, uniform, gauss));
  const top = Math.max(...logs);
  const weights = logs.map((l) => Math.exp(l - top));
  const total = weights.reduce((a, b) => a + b, 0);
  return weights.map((w) => w / total);
}

function iid(n: number, clients: number, uniform: () => number): number[][] {
  return cut(shuffle(range(n), uniform), clients);
}

function shards(
  labels: ArrayLike<number>,
  clients: number,
  perClient: number,
  uniform: () => number,
): number[][] {
  const byLabel = range(labels.length).sort((a, b) => labels[a]! - labels[b]! || a - b);
  const pieces = cut(byLabel, clients * perClient);
  const dealt = cut(shuffle(range(pieces.length), uniform), clients);
  return dealt.map((ids) => ids.flatMap((id) => pieces[id]!));
}

/** The sample indices of each label, labels ascending. */
function byLabel(labels: ArrayLike<number>): number[][] {
  const groups = new Map<number, number[]>();
  for (let i = 0; i < labels.length; i += 1) {
    const label = labels[i]!;
    const group = groups.get(label);
    if (group === undefined) groups.set(label, [i]);
    else group.push(i);
  }
  return [...groups].sort(([a], [b]) => a - b).map(([, group]) => group);
}

/** One Dirichlet draw per label, each label's shuffled samples cut at the cumulative shares. */
function dirichletOnce(
  groups: readonly number[][],
  clients: number,
  alpha: number,
  uniform: () => number,
): number[][] {
  const out: number[][] = range(clients).map(() => []);
  for (const group of groups) {
    const members = shuffle([...group], uniform);
    const shares = sampleDirichlet(alpha, clients, uniform);
    let cumulative = 0;
    let from = 0;
    shares.forEach((share, k) => {
      cumulative += share;
      const to = k === clients - 1 ? members.length : Math.round(cumulative * members.length);
      for (let m = from; m < to; m += 1) out[k]!.push(members[m]!);
      from = Math.max(from, to);
    });
  }
  return out;
}

function dirichlet(
  labels: ArrayLike<number>,
  clients: number,
  alpha: number,
  minSamples: number,
  uniform: () => number,
): number[][] {
  const groups = byLabel(labels);
  for (let draw = 0; draw < maxDraws; draw += 1) {
    const parts = dirichletOnce(groups, clients, alpha, uniform);
    if (parts.every((p) => p.length >= minSamples)) return parts;
  }
  throw new ValidationError(
    `no Dirichlet(${alpha}) partition over ${clients} clients gave each ${minSamples} samples in ${maxDraws} draws`,
  );
}

/** Throws unless `value` is an integer from `min` to `max` (ValidationError naming the option). */
function checkInteger(name: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new ValidationError(`${name} ${value} is not an integer from ${min} to ${max}`);
  }
}

/** Throws unless the options fit `n` samples (ValidationError naming the option). */
function checkOptions(n: number, options: PartitionOptions): void {
  const { kind, clients, alpha = 0.5, shardsPerClient = 2, minSamples = 0 } = options;
  if (!partitionKinds.includes(kind)) {
    throw new ValidationError(`split ${String(kind)} is not one of ${partitionKinds.join(', ')}`);
  }
  checkInteger('clients', clients, 1, n);
  if (!Number.isFinite(alpha) || alpha <= 0) {
    throw new ValidationError(`alpha ${alpha} is not a finite number > 0`);
  }
  checkInteger('shardsPerClient', shardsPerClient, 1, Math.floor(n / clients));
  checkInteger('minSamples', minSamples, 0, Math.floor(n / clients));
}

/**
 * The sample indices (into `labels`, ascending) each of `options.clients` clients holds: every
 * index exactly once. The same labels and options give the same partition.
 */
function partition(labels: ArrayLike<number>, options: PartitionOptions): number[][] {
  checkOptions(labels.length, options);
  const uniform = seededRandom(options.seed);
  const { clients } = options;
  const parts =
    options.kind === 'iid'
      ? iid(labels.length, clients, uniform)
      : options.kind === 'shards'
        ? shards(labels, clients, options.shardsPerClient ?? 2, uniform)
        : dirichlet(labels, clients, options.alpha ?? 0.5, options.minSamples ?? 0, uniform);
  return parts.map((part) => part.sort(ascending));
}

/** How many of `indices` carry each label 0 to classes - 1 (other labels are not counted). */
function labelHistogram(
  labels: ArrayLike<number>,
  indices: readonly number[],
  classes: number,
): number[] {
  const counts = new Array<number>(classes).fill(0);
  for (const i of indices) {
    const label = labels[i] ?? -1;
    if (label >= 0 && label < classes) counts[label]! += 1;
  }
  return counts;
}

export { partition, partitionKinds, labelHistogram, sampleGamma, sampleDirichlet };
export type { PartitionKind, PartitionOptions };
