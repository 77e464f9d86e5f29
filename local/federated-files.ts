/**
 * The files knative/samples/federated-digits.yaml names, made on this machine: each node's
 * Dataset (an iid share of the MNIST training digits, shared/fl/partition.ts) and the evaluation
 * Dataset (held-out test digits) as the csv files the trainers and the aggregator read, and the
 * sample itself with its paths moved here — the Datasets' /var/lib/edgeai/fl/ to the directory
 * written, the Model's /var/lib/edgeai/models/ to the repository's models/ (the stack's
 * MODEL_ROOT, where file:// models must be, as the JointInferenceService tour's are).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import type { KubeObject } from '../shared/k8s/index.js';
import { writeDatasetCsv } from '../shared/fl/dataset-file.js';
import { partition } from '../shared/fl/partition.js';
import { seededRandom, shuffle } from '../shared/random/index.js';
import { loadMnist } from '../shared/training/data.js';

const sampleFile = 'knative/samples/federated-digits.yaml';
const sampleData = 'file:///var/lib/edgeai/fl/';
const sampleModels = 'file:///var/lib/edgeai/models/';

interface FederatedDataOptions {
  /** Digits per node (the training split spread iid over the nodes, then cut to this). */
  perClient: number;
  /** Held-out test digits in the evaluation Dataset. */
  evaluation: number;
  /** The split's seed (default 1). */
  seed?: number;
}

interface FederatedData {
  dir: string;
  /** digits-0.csv ... with the digits each holds, as the sample's Datasets name them. */
  clients: Array<{ file: string; samples: number }>;
  evaluation: { file: string; samples: number };
}

/**
 * Writes `<dir>/digits-<i>.csv` for the sample's three nodes and `<dir>/digits-eval.csv`, the
 * names the sample's Datasets give under /var/lib/edgeai/fl/. Deterministic for a seed.
 */
function writeFederatedData(dir: string, options: FederatedDataOptions): FederatedData {
  mkdirSync(dir, { recursive: true });
  const { train, test } = loadMnist();
  const seed = options.seed ?? 1;
  const parts = partition(train.y, { kind: 'iid', clients: 3, seed });
  const clients = parts.map((indices, i) => {
    // A seeded draw from the share: the training split is ordered by digit.
    const picked = shuffle([...indices], seededRandom(seed + i + 1))
      .slice(0, options.perClient)
      .sort((a, b) => a - b);
    const file = join(dir, `digits-${i}.csv`);
    writeFileSync(file, writeDatasetCsv(train, picked));
    return { file, samples: picked.length };
  });
  const held = shuffle(
    Array.from({ length: test.n }, (_, i) => i),
    seededRandom(seed),
  ).slice(0, options.evaluation);
  const evaluation = join(dir, 'digits-eval.csv');
  writeFileSync(evaluation, writeDatasetCsv(test, held));
  return { dir, clients, evaluation: { file: evaluation, samples: held.length } };
}

/** A sample URL moved here: data to `dataDir`, models to the repository's models/. */
function localUrl(url: unknown, root: URL, dataDir: string): unknown {
  if (typeof url !== 'string') return url;
  if (url.startsWith(sampleData)) return pathToFileURL(join(dataDir, basename(url))).href;
  if (url.startsWith(sampleModels)) return new URL(`models/${basename(url)}`, root).href;
  return url;
}

/**
 * The sample's documents (Datasets, Model, FederatedLearningJob) with their file URLs moved to
 * `dataDir` (written by writeFederatedData) and the repository's models/.
 */
function federatedSample(root: URL, dataDir: string): KubeObject[] {
  const text = readFileSync(new URL(sampleFile, root), 'utf8');
  return parseAllDocuments(text).map((doc) => {
    const object = doc.toJS() as KubeObject & { spec?: { url?: unknown } };
    if (object.spec !== undefined && 'url' in object.spec)
      object.spec.url = localUrl(object.spec.url, root, dataDir);
    return object;
  });
}

/**
 * For `npm run local`: the sample's data under `<stateDir>/fl/` and `<stateDir>/fl.yaml`, the
 * sample with those paths, ready for `kubectl apply -f`.
 */
function writeFederatedStarter(root: URL, stateDir: string): { manifest: string } & FederatedData {
  const data = writeFederatedData(join(stateDir, 'fl'), { perClient: 1000, evaluation: 1000 });
  const manifest = join(stateDir, 'fl.yaml');
  const header = `# ${sampleFile} with its files on this machine: the Datasets under ${data.dir}/ (${data.clients[0]?.samples ?? 0} digits per node, ${data.evaluation.samples} to evaluate), the Model's initial weights the repository's models/edge.onnx.\n`;
  writeFileSync(
    manifest,
    header +
      federatedSample(root, data.dir)
        .map((d) => stringify(d))
        .join('---\n'),
  );
  return { manifest, ...data };
}

export { federatedSample, writeFederatedData, writeFederatedStarter, sampleFile };
export type { FederatedData, FederatedDataOptions };
