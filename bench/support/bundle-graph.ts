/**
 * What each function's container loads from the image's bundle, read from esbuild's metafile:
 * the entry (dist/bundle/serve.mjs) and the chunks it imports statically, then the function's own
 * chunk (serve.mjs imports each function dynamically, only the target one) and the chunks that
 * imports statically. The source modules in those chunks are what the function pulls in.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

interface Metafile {
  outputs: Record<
    string,
    {
      bytes: number;
      entryPoint?: string;
      inputs: Record<string, { bytesInOutput: number }>;
      imports: Array<{ path: string; kind: string; external?: boolean }>;
    }
  >;
}

interface FunctionBundle {
  name: string;
  /** Output chunks loaded (the entry's included). */
  chunks: number;
  /** Bytes of those chunks. */
  bytes: number;
  /** Source modules (repository paths, node_modules/<package>/... for packages) in them. */
  modules: string[];
}

/** Builds the bundle as `npm run bundle` does, into a fresh directory, and reads its metafile. */
async function buildBundle(root: string): Promise<Metafile> {
  const out = mkdtempSync(join(tmpdir(), 'edgeai-bundle-'));
  await promisify(execFile)(
    'npm',
    ['run', '-s', 'bundle', '--', `--outdir=${out}`, `--metafile=${join(out, 'meta.json')}`],
    { cwd: root },
  );
  return JSON.parse(readFileSync(join(out, 'meta.json'), 'utf8')) as Metafile;
}

/** The chunks reachable from `start` through static imports. */
function staticClosure(meta: Metafile, start: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...start];
  for (let path = queue.pop(); path !== undefined; path = queue.pop()) {
    if (seen.has(path)) continue;
    seen.add(path);
    for (const edge of meta.outputs[path]?.imports ?? []) {
      if (edge.kind === 'import-statement' && edge.external !== true) queue.push(edge.path);
    }
  }
  return seen;
}

/** Per function (functions/<name>/index.ts), what its container loads. */
function functionBundles(meta: Metafile): FunctionBundle[] {
  const outputs = Object.entries(meta.outputs);
  const entry = outputs.find(([, o]) => o.entryPoint === 'bin/serve.ts')?.[0];
  if (entry === undefined) throw new Error('the metafile has no bin/serve.ts entry');
  return outputs
    .flatMap(([path, o]) => {
      const name = /^functions\/([^/]+)\/index\.ts$/.exec(o.entryPoint ?? '')?.[1];
      return name === undefined ? [] : [{ name, path }];
    })
    .map(({ name, path }) => {
      const chunks = staticClosure(meta, [entry, path]);
      const modules = new Set<string>();
      let bytes = 0;
      for (const chunk of chunks) {
        const output = meta.outputs[chunk]!;
        bytes += output.bytes;
        // A module esbuild tree-shook to nothing is listed with 0 bytes: it is not loaded.
        for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
          if (bytesInOutput > 0) modules.add(input);
        }
      }
      return { name, chunks: chunks.size, bytes, modules: [...modules].sort() };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

export { buildBundle, functionBundles, staticClosure };
export type { FunctionBundle, Metafile };
