/** The benchmark output convention: a human table, then one JSON line that tools read. */

type Op = '>=' | '<=';

interface Target {
  value: number;
  op: Op;
  target: number;
}

/** Prints rows as an aligned text table. */
function printTable(
  title: string,
  header: readonly string[],
  rows: ReadonlyArray<readonly (string | number)[]>,
): void {
  const cells = [
    header,
    ...rows.map((row) => row.map((c) => (typeof c === 'number' ? format(c) : c))),
  ];
  const widths = header.map((_, i) => Math.max(...cells.map((row) => String(row[i] ?? '').length)));
  const line = (row: readonly (string | number)[]) =>
    row.map((c, i) => String(c).padStart(widths[i] ?? 0)).join('  ');
  process.stdout.write(
    `\n${title}\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`,
  );
  for (const row of cells.slice(1)) process.stdout.write(`${line(row)}\n`);
}

function format(n: number): string {
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  return n >= 100 ? n.toFixed(0) : n.toFixed(3);
}

function met(t: Target): boolean {
  return t.op === '>=' ? t.value >= t.target : t.value <= t.target;
}

/** Prints the targets' verdicts and the final JSON line (it must be the last line printed). */
function finish(
  bench: string,
  figures: Record<string, number>,
  targets: Record<string, Target>,
): void {
  printTable(
    'targets',
    ['figure', 'value', 'target', 'met'],
    Object.entries(targets).map(([name, t]) => [
      name,
      t.value,
      `${t.op} ${t.target}`,
      met(t) ? 'yes' : 'NO',
    ]),
  );
  process.stdout.write(`${JSON.stringify({ bench, figures, targets })}\n`);
}

/** Median of a non-empty list. */
function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export { printTable, finish, median };
export type { Target };
