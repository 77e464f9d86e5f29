/**
 * The layering where it matters: what each function's container loads from the image's bundle
 * (esbuild's metafile, built as `npm run bundle` builds it). No function loads the research
 * code, the digits, the local stack, bench or test code; only the federated functions load the
 * network, its ONNX writer and onnx-proto; and no function loads a domain only others need
 * (bench/support/bundle-rules.ts); `npm run bench -- bundle` prints the sizes.
 */
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildBundle, functionBundles } from '../../bench/support/bundle-graph.js';
import type { FunctionBundle } from '../../bench/support/bundle-graph.js';
import { unneededModules } from '../../bench/support/bundle-rules.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

describe('the image bundle, per function', () => {
  let bundles: FunctionBundle[];
  beforeAll(async () => {
    bundles = functionBundles(await buildBundle(root));
  }, 120_000);

  it('has one entry chunk per function', () => {
    expect(bundles.map((b) => b.name)).toEqual([
      'aset-scheduler',
      'cloud-infer',
      'downstream-sync',
      'edge-infer',
      'fl-aggregator',
      'fl-trainer',
      'joiner',
      'reconcile-tick',
      'router',
      'upstream-status',
    ]);
  });

  it('loads nothing of another domain a function does not need', () => {
    const unneeded = Object.fromEntries(bundles.map((b) => [b.name, unneededModules(b)]));
    expect(unneeded).toEqual(Object.fromEntries(bundles.map((b) => [b.name, []])));
  });

  it('still loads what each function is for (the rules are not vacuous)', () => {
    const has = (name: string, prefix: string) =>
      bundles.find((b) => b.name === name)?.modules.some((m) => m.startsWith(prefix));
    expect(has('aset-scheduler', 'shared/aset/')).toBe(true);
    // The check, spelled out: the live scheduler carries no trainer and no simulator.
    for (const research of ['shared/training/', 'node_modules/onnx-proto/', 'research/'])
      expect(has('aset-scheduler', research), research).toBe(false);
    expect(has('edge-infer', 'shared/inference/')).toBe(true);
    expect(has('edge-infer', 'shared/aset/')).toBe(false);
    expect(has('router', 'shared/mlgraph/')).toBe(true);
    expect(has('reconcile-tick', 'shared/controller/')).toBe(true);
    expect(has('fl-trainer', 'shared/training/network.ts')).toBe(true);
    expect(has('fl-aggregator', 'node_modules/onnx-proto/')).toBe(true);
    for (const name of ['edge-infer', 'reconcile-tick', 'router'])
      expect(has(name, 'node_modules/onnx-proto/'), name).toBe(false);
  });
});
