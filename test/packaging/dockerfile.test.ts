/**
 * No Docker engine runs here, so the Dockerfile is checked statically: every file it copies
 * exists, the build emits the entry point it runs (test/bin runs that bundle), dev dependencies
 * are pruned, and the final stage runs as a non-root user.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url);
const text = readFileSync(new URL('Dockerfile', root), 'utf8');
const lines = text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
const stages = text.split(/^FROM /m).slice(1);

describe('Dockerfile', () => {
  it('has a build stage and a runtime stage', () => {
    expect(stages).toHaveLength(2);
    expect(stages[0]).toMatch(/AS build/);
  });

  it('copies only files that exist in the repository', () => {
    const sources = lines
      .filter((line) => line.startsWith('COPY ') && !line.includes('--from='))
      .flatMap((line) =>
        line
          .replace(/^COPY\s+/, '')
          .split(/\s+/)
          .slice(0, -1),
      );
    expect(sources.length).toBeGreaterThan(4);
    for (const source of sources) expect(existsSync(new URL(source, root)), source).toBe(true);
  });

  it('runs the entry point the build emits', () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(stages[0]).toMatch(/RUN npm run bundle/);
    expect(pkg.scripts['bundle']).toMatch(/^esbuild bin\/serve\.ts .*--outdir=dist\/bundle /);
    expect(pkg.scripts['bundle']).toMatch(/--out-extension:\.js=\.mjs/);
    expect(existsSync(new URL('bin/serve.ts', root))).toBe(true);
    expect(stages[1]).toMatch(/COPY --from=build \S+ \/app\/dist\/bundle \.\/dist\/bundle/);
    expect(text).toMatch(/CMD \["node", "dist\/bundle\/serve\.mjs"\]/);
  });

  it('ships production dependencies only and runs as a non-root user', () => {
    expect(stages[0]).toMatch(/npm prune --omit=dev/);
    const runtime = stages[1] ?? '';
    expect(runtime).toMatch(/^USER (?!root\b)(?!0\b)\S+/m);
    expect(runtime).not.toMatch(/npm (ci|install)/);
    expect(runtime).toMatch(/ENV NODE_ENV=production/);
  });

  it('keeps the CUDA download switched off in the install the image runs', () => {
    expect(stages[0]).toMatch(/COPY package\.json package-lock\.json \.npmrc/);
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
      allowScripts: Record<string, boolean>;
    };
    expect(pkg.allowScripts['onnxruntime-node']).toBe(false);
    expect(readFileSync(new URL('.npmrc', root), 'utf8')).toMatch(
      /^onnxruntime-node-install=skip$/m,
    );
  });
});
