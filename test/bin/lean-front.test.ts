/**
 * The container serves from `node:http` alone: no function's part of the image bundle (what its
 * container loads: `npm run bundle`, read from esbuild's metafile) holds functions-framework,
 * Express or body-parser. The framework is reached through bin/ff/ only
 * (test/e2e/framework-cli.test.ts).
 */
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildBundle, functionBundles } from '../../bench/support/bundle-graph.js';
import type { FunctionBundle } from '../../bench/support/bundle-graph.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const framework = [
  'node_modules/@google-cloud/functions-framework/',
  'node_modules/express/',
  'node_modules/body-parser/',
];

describe('the image bundle', () => {
  let bundles: FunctionBundle[];
  beforeAll(async () => {
    bundles = functionBundles(await buildBundle(root));
  }, 120_000);

  it('loads nothing of functions-framework or Express in any function', () => {
    expect(bundles.length).toBeGreaterThan(0);
    const loaded = Object.fromEntries(
      bundles.map((b) => [
        b.name,
        b.modules.filter((m) => framework.some((prefix) => m.startsWith(prefix))),
      ]),
    );
    expect(loaded).toEqual(Object.fromEntries(bundles.map((b) => [b.name, []])));
  });

  it('loads the lean front (the check is not vacuous)', () => {
    for (const b of bundles) expect(b.modules, b.name).toContain('shared/http/server.ts');
  });
});
