/**
 * A trainer's Dataset, read afresh every round (a trainer holds nothing between rounds): the
 * file a Sedna Dataset names (`file:///path` or an absolute path, as mounted into the trainer's
 * pod), at most `maxBytes` of it (refused from its size before a byte is read), parsed as the
 * `csv` format of shared/fl/dataset-file.ts. Any other format is refused, naming it.
 */
import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PayloadTooLargeError, ValidationError } from '../errors/index.js';
import type { Split } from '../training/data.js';
import { parseDatasetCsv } from './dataset-file.js';

/** Where a Dataset is and what a round accepts of it. */
interface DatasetSource {
  /** `file:///path` or an absolute path. */
  readonly url: string;
  /** Sedna's Dataset `format`; only `csv` is read. */
  readonly format: string;
  readonly maxBytes: number;
  /** Labels are 0 to classes - 1 (the model's outputs; default 10). */
  readonly classes?: number;
}

/** Reads a Dataset into a split; the trainer's default, a test's real one. */
type DatasetReader = (source: DatasetSource) => Promise<Split>;

const pixels = 784;
/** The shortest valid line: a one-digit label and 784 one-digit pixels, commas and a newline. */
const shortestLine = 2 * pixels + 2;
/** A JSON-quoted string in a message. */
const quoted = /"(?:[^"\\]|\\.)*"/g;

/** The file path a Dataset URL names, or a ValidationError saying what is accepted. */
function datasetPath(url: string): string {
  if (url.startsWith('file:')) {
    try {
      return fileURLToPath(url);
    } catch (err) {
      throw new ValidationError(`DATASET_URL ${url}: ${(err as Error).message}`);
    }
  }
  if (isAbsolute(url)) return url;
  throw new ValidationError(`DATASET_URL ${url}: expected file:///path or an absolute path`);
}

/** The file's bytes, refused when over `maxBytes` (by its size, then as read). */
async function readBounded(path: string, maxBytes: number): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new ValidationError(`dataset ${path} is not a file`);
    const tooLarge = (size: number) =>
      new PayloadTooLargeError(
        `dataset ${path} is ${size} bytes, over FL_MAX_DATASET_BYTES (${maxBytes})`,
      );
    if (stats.size > maxBytes) throw tooLarge(stats.size);
    // One byte more than the size: a file that grew while read is noticed, not cut short.
    const buffer = Buffer.allocUnsafe(stats.size + 1);
    let filled = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
      if (filled === buffer.length) break;
    }
    if (filled > maxBytes) throw tooLarge(filled);
    if (filled > stats.size) throw new ValidationError(`dataset ${path} changed while read`);
    return buffer.subarray(0, filled);
  } finally {
    await handle.close();
  }
}

/**
 * The Dataset at `source.url` as a split (pixels / 255). Throws ValidationError for a format
 * other than csv, a URL that is not a file and a malformed file, PayloadTooLargeError for one
 * over the limit and the file system's error for one that cannot be read.
 */
async function readDataset(source: DatasetSource): Promise<Split> {
  if (source.format.toLowerCase() !== 'csv') {
    throw new ValidationError(
      `DATASET_FORMAT ${JSON.stringify(source.format)} is not supported: the trainer reads csv`,
    );
  }
  const bytes = await readBounded(datasetPath(source.url), source.maxBytes);
  try {
    return parseDatasetCsv(bytes.toString('utf8'), {
      // No file of this size holds more valid lines: the bound keeps a malformed one from
      // allocating for lines it does not have.
      maxSamples: Math.max(1, Math.floor((bytes.length + 1) / shortestLine)),
      pixels,
      ...(source.classes === undefined ? {} : { classes: source.classes }),
    });
  } catch (err) {
    // The parser quotes the field it refused: a piece of the training data, which no message
    // carries. The line and column say where to look.
    if (err instanceof ValidationError) {
      throw new ValidationError(`dataset ${source.url}: ${err.message.replace(quoted, 'a value')}`);
    }
    throw err;
  }
}

/** The file's stats, or undefined when it cannot be stat'ed. */
function statOrUndefined(path: string) {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/**
 * `read` with the last Dataset it parsed kept while its file is unchanged (same size and mtime):
 * a warm trainer skips the parse, round after round, and one that read its Dataset at start-up
 * skips it in its first round; one started afresh (scaled from zero) reads the file again.
 * A kept split is checked against each caller's classes. Nothing depends on the cache, so the
 * trainer still holds nothing it needs.
 */
function cachedDatasetReader(read: DatasetReader = readDataset): DatasetReader {
  let last: { key: string; split: Split } | undefined;
  return async (source) => {
    // Synchronous, a few microseconds: on the training thread an asynchronous stat costs a wake-up
    // at the thread's lowered priority, which other trainers' training can hold off.
    const stats = statOrUndefined(datasetPath(source.url));
    const key =
      stats === undefined
        ? undefined
        : JSON.stringify([source.url, source.format, source.maxBytes, stats.size, stats.mtimeMs]);
    if (key !== undefined && last?.key === key) return checkClasses(source, last.split);
    const split = await read(source);
    last = key === undefined ? undefined : { key, split };
    return split;
  };
}

/** `split` unless a label is not below `source.classes` (ValidationError naming the sample). */
function checkClasses(source: DatasetSource, split: Split): Split {
  const { classes = 10 } = source;
  const at = split.y.findIndex((label) => label >= classes);
  if (at >= 0) {
    throw new ValidationError(
      `dataset ${source.url}: sample ${at + 1} has label ${split.y[at]}, the model has ${classes} classes`,
    );
  }
  return split;
}

export { readDataset, datasetPath, cachedDatasetReader };
export type { DatasetReader, DatasetSource };
