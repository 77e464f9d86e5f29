/**
 * `npm run fl:data -- --clients 10 --split iid|shards|dirichlet [--alpha 0.5] [--min-samples 1]
 * --seed 1 --out DIR [--prefix client]`: spreads the MNIST training split over federated
 * clients (shared/fl/partition.ts) and writes one Dataset file per client, DIR/<prefix>-<i>.csv
 * (i from 0), plus the test split as DIR/evaluation.csv, the files a FederatedLearningJob's
 * trainers and evaluator read. Prints each client's sample count and label histogram, so the
 * skew of the split is visible before a job runs. Deterministic for a seed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ValidationError } from '../shared/errors/index.js';
import { labelHistogram, partition, partitionKinds, writeDatasetCsv } from '../shared/fl/index.js';
import type { PartitionKind } from '../shared/fl/index.js';
import { classes, loadMnist } from '../shared/training/data.js';

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '10' },
    split: { type: 'string', default: 'iid' },
    alpha: { type: 'string', default: '0.5' },
    'min-samples': { type: 'string', default: '1' },
    seed: { type: 'string', default: '1' },
    out: { type: 'string' },
    prefix: { type: 'string', default: 'client' },
  },
});

const integer = (flag: string, raw: string) => {
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < 0)
    fail(`--${flag} must be an integer >= 0 (got ${raw})`);
  return value;
};
const kind = values.split;
if (!(partitionKinds as readonly string[]).includes(kind)) {
  fail(`--split must be one of ${partitionKinds.join(', ')} (got ${kind})`);
}
const out = values.out ?? fail('give --out DIR');
if (!/^[A-Za-z0-9_-]+$/.test(values.prefix)) fail(`--prefix must be letters, digits, _ or -`);

const data = loadMnist();
let parts: number[][];
try {
  parts = partition(data.train.y, {
    kind: kind as PartitionKind,
    clients: integer('clients', values.clients),
    seed: integer('seed', values.seed),
    alpha: Number(values.alpha),
    minSamples: kind === 'dirichlet' ? integer('min-samples', values['min-samples']) : 0,
  });
} catch (err) {
  if (err instanceof ValidationError) fail(err.message);
  throw err;
}

mkdirSync(out, { recursive: true });
const rows = parts.map((indices, i) => {
  const file = `${values.prefix}-${i}.csv`;
  writeFileSync(join(out, file), writeDatasetCsv(data.train, indices));
  return [file, indices.length, ...labelHistogram(data.train.y, indices, classes)];
});
writeFileSync(join(out, 'evaluation.csv'), writeDatasetCsv(data.test));
const all = [...data.train.y.keys()];
rows.push(['total', data.train.n, ...labelHistogram(data.train.y, all, classes)]);
rows.push([
  'evaluation.csv',
  data.test.n,
  ...labelHistogram(data.test.y, [...data.test.y.keys()], classes),
]);

const header = ['file', 'samples', ...Array.from({ length: classes }, (_, k) => `${k}`)];
const table = [header, ...rows].map((row) => row.map(String));
const widths = header.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
const format = (row: string[]) =>
  row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
const alphaNote = kind === 'dirichlet' ? ` alpha ${values.alpha}` : '';
process.stdout.write(
  `${kind}${alphaNote} split of the ${data.train.n} training digits over ${parts.length} clients (seed ${values.seed}), written to ${out}:\n`,
);
process.stdout.write(`${table.map(format).join('\n')}\n`);
