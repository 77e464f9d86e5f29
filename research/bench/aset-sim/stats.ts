/**
 * Mean and 95% confidence interval over a handful of seed-runs. The seeds are few (5 by default),
 * so the normal 1.96 would understate the interval; Student's t with seeds - 1 degrees of freedom
 * is the honest one, and its quantiles are hard-coded rather than pulled in from a package.
 */

/**
 * t_{0.975, df} for df = 1..30 (two-sided 95%), from any standard table; beyond 30 the normal
 * 1.96 is within 2% of t, which is far below the seed-to-seed spread reported.
 */
const t975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145,
  2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048,
  2.045, 2.042,
];

interface MeanCi {
  readonly mean: number;
  /** Half-width of the 95% interval; NaN with a single value (no spread to estimate). */
  readonly halfWidth: number;
}

/** Mean and 95% Student-t half-width of `values` (non-empty). */
function meanCi(values: readonly number[]): MeanCi {
  if (values.length === 0) throw new RangeError('meanCi needs at least one value');
  const n = values.length;
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { mean, halfWidth: NaN };
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1);
  const t = t975[n - 2] ?? 1.96;
  return { mean, halfWidth: (t * Math.sqrt(variance)) / Math.sqrt(n) };
}

/** "73.22 ± 0.51" (percent points), or just the mean when there is no interval. */
function formatCi({ mean, halfWidth }: MeanCi, digits = 2): string {
  return Number.isNaN(halfWidth)
    ? mean.toFixed(digits)
    : `${mean.toFixed(digits)} ± ${halfWidth.toFixed(digits)}`;
}

export { meanCi, formatCi };
export type { MeanCi };
