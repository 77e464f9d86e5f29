/**
 * A node's training data as a file: Sedna's Dataset `format: csv`, one sample per line,
 * `label,p0,...,p783` with the label 0-9 and each pixel an integer 0-255, after an optional header
 * line. Parsing is strict (every field an integer in range, every line the same width) and says
 * where it failed (line, column, value); it stops at the caller's sample limit before allocating.
 * Pixels are stored as round(255 x) and read back as p / 255, so a dataset written from floats in
 * [0, 1] loses at most 1/510 per pixel (the mnist package's 3-decimal values do).
 */
import { ValidationError } from '../errors/index.js';
import type { Split } from '../training/data.js';

/** What a parser accepts: at most `maxSamples` lines of `pixels` pixels and labels < `classes`. */
interface ParseLimits {
  readonly maxSamples: number;
  /** Pixel columns per line (default 784, a 28x28 digit). */
  readonly pixels?: number;
  /** Labels are 0 to classes - 1 (default 10). */
  readonly classes?: number;
}

const comma = 44;
const zero = 48;
const nine = 57;

/** The header line for `pixels` columns: `label,p0,...`. */
const headerLine = (pixels: number) =>
  ['label', ...Array.from({ length: pixels }, (_, i) => `p${i}`)].join(',');

/**
 * The samples `indices` (default all) of `split` as CSV text with a header line and a newline
 * after every line; pixels are clamped to [0, 1] and rounded to 0-255.
 */
function writeDatasetCsv(split: Split, indices?: readonly number[]): string {
  const pixels = split.n === 0 ? 0 : split.x.length / split.n;
  const lines = [headerLine(pixels)];
  const row = new Array<number>(pixels + 1);
  for (const i of indices ?? Array.from({ length: split.n }, (_, k) => k)) {
    if (!Number.isSafeInteger(i) || i < 0 || i >= split.n) {
      throw new ValidationError(`sample index ${i} is not in 0 to ${split.n - 1}`);
    }
    row[0] = split.y[i]!;
    for (let p = 0; p < pixels; p += 1) {
      const v = split.x[i * pixels + p]!;
      row[p + 1] = Math.round(255 * Math.min(1, Math.max(0, v)));
    }
    lines.push(row.join(','));
  }
  return `${lines.join('\n')}\n`;
}

/** The column a 0-based field index is, for a message: `column 3 (p1)`. */
const columnName = (field: number) =>
  `column ${field + 1} (${field === 0 ? 'label' : `p${field - 1}`})`;

/** The error for field `field` of `line` (line number `lineNo`), quoting its value. */
function fieldError(line: string, lineNo: number, field: number, limit: number): ValidationError {
  const value = line.split(',')[field] ?? '';
  const shown = JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}...` : value);
  const what = field === 0 ? `a label 0-${limit}` : `a pixel 0-${limit}`;
  return new ValidationError(`line ${lineNo}, ${columnName(field)}: ${shown} is not ${what}`);
}

/** The error for a line with other than `width` + 1 fields. */
const columnsError = (line: string, lineNo: number, width: number) =>
  new ValidationError(
    `line ${lineNo} has ${line.split(',').length} columns, expected ${width + 1} (label and ${width} pixels)`,
  );

/**
 * Parses one data line into `x` at `offset` (pixels / 255) and returns its label. Scans
 * characters rather than splitting, so a 7,000-line file allocates no per-field strings.
 */
function parseRow(
  line: string,
  lineNo: number,
  width: number,
  classes: number,
  x: Float32Array,
  offset: number,
): number {
  let field = 0;
  let value = 0;
  let digits = 0;
  let label = 0;
  for (let c = 0; c <= line.length; c += 1) {
    const code = c < line.length ? line.charCodeAt(c) : comma;
    if (code >= zero && code <= nine) {
      value = value * 10 + code - zero;
      digits += 1;
      continue;
    }
    if (field > width) throw columnsError(line, lineNo, width);
    const limit = field === 0 ? classes - 1 : 255;
    if (code !== comma || digits === 0 || digits > 3 || value > limit) {
      throw fieldError(line, lineNo, field, limit);
    }
    if (field === 0) label = value;
    else x[offset + field - 1] = value / 255;
    field += 1;
    value = 0;
    digits = 0;
  }
  if (field !== width + 1) throw columnsError(line, lineNo, width);
  return label;
}

/** The lines of `text` without the final newline's empty line, and whether line 1 is a header. */
function dataLines(text: string): { lines: string[]; header: boolean } {
  const lines = text.split(/\r?\n/);
  if (lines.at(-1) === '') lines.pop();
  const first = lines[0] ?? '';
  const header = first !== '' && !/^[0-9]/.test(first);
  return { lines, header };
}

/**
 * Reads a dataset file written by writeDatasetCsv (or by hand): refuses (ValidationError naming
 * the line, column and value) an empty file, more than `limits.maxSamples` samples, a line of the
 * wrong width, an empty line, a header of the wrong width and any field that is not an integer
 * in range.
 */
function parseDatasetCsv(text: string, limits: ParseLimits): Split {
  const width = limits.pixels ?? 784;
  const classes = limits.classes ?? 10;
  const { lines, header } = dataLines(text);
  const columns = (lines[0] ?? '').split(',').length;
  if (header && columns !== width + 1) {
    throw new ValidationError(`line 1 (the header) has ${columns} columns, expected ${width + 1}`);
  }
  const first = header ? 1 : 0;
  const n = lines.length - first;
  if (n < 1) throw new ValidationError('the dataset has no samples');
  if (n > limits.maxSamples) {
    throw new ValidationError(
      `the dataset has ${n} samples, over the limit of ${limits.maxSamples}`,
    );
  }
  const x = new Float32Array(n * width);
  const y = new Uint8Array(n);
  for (let i = 0; i < n; i += 1) {
    const line = lines[first + i]!;
    if (line === '') throw new ValidationError(`line ${first + i + 1} is empty`);
    y[i] = parseRow(line, first + i + 1, width, classes, x, i * width);
  }
  return { x, y, n };
}

export { writeDatasetCsv, parseDatasetCsv };
export type { ParseLimits };
