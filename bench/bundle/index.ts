/**
 * bench/bundle: what each function's container loads from the image's bundle (esbuild's
 * metafile): chunks, bytes and source modules, and how many of those are another domain's that
 * the function should not need (the trainer and onnx-proto anywhere; the ASET simulator outside
 * aset-scheduler; the embedded local stack, bench or test code anywhere). Not timed: sizes.
 */
import { fileURLToPath } from 'node:url';
import { buildBundle, functionBundles } from '../support/bundle-graph.js';
import { finish, printTable } from '../support/report.js';
import { unneededModules } from '../support/bundle-rules.js';

async function main(): Promise<void> {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const bundles = functionBundles(await buildBundle(root));
  printTable(
    'per function (serve.mjs and its static chunks, then the function chunk and its static chunks)',
    ['function', 'chunks', 'KiB', 'modules', 'unneeded'],
    bundles.map((b) => [
      b.name,
      b.chunks,
      Math.round(b.bytes / 1024),
      b.modules.length,
      unneededModules(b).length,
    ]),
  );
  const unneeded = bundles.reduce((sum, b) => sum + unneededModules(b).length, 0);
  finish(
    'bundle',
    Object.fromEntries(bundles.map((b) => [`${b.name}KiB`, Math.round(b.bytes / 1024)])),
    { unneededModules: { value: unneeded, op: '<=', target: 0 } },
  );
}

export { main };
