/**
 * No Docker engine runs here, so the Dockerfile is checked statically: every file it copies
 * exists, the build emits the entry point it runs (test/bin runs that bundle), dev dependencies
 * are pruned, the final stage runs as a non-root user, and the data files functions read at run
 * time are where their settings look for them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadAsetSchedulerConfig } from '../../shared/aset/index.js';

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
    // The variable onnxruntime-node's install script reads (script/install-utils.js): npm 10
    // runs the script whatever package.json's allowScripts (npm 11) says.
    expect(stages[0]).toMatch(/^RUN ONNXRUNTIME_NODE_INSTALL=skip npm ci /m);
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {
      allowScripts: Record<string, boolean>;
    };
    expect(pkg.allowScripts['onnxruntime-node']).toBe(false);
    // And where `make` installs.
    expect(readFileSync(new URL('Makefile', root), 'utf8')).toMatch(
      /^\tONNXRUNTIME_NODE_INSTALL=skip npm ci /m,
    );
  });

  it('ships the scenario and the networks aset-scheduler reads, where it looks for them', () => {
    const runtime = stages[1] ?? '';
    const workdir = /^WORKDIR (\S+)$/m.exec(runtime)?.[1];
    expect(workdir, 'the runtime stage sets WORKDIR').toBe('/app');
    // Copied from the build context, not from the build stage (which never sees them).
    expect(runtime).toMatch(/^COPY data\/aset \.\/data\/aset$/m);
    expect(runtime).toMatch(/^COPY models \.\/models$/m);
    // The defaults resolve against the working directory the process starts in.
    const settings = loadAsetSchedulerConfig({ ASET_TOPOLOGY: 'full-edge' }, workdir);
    expect(settings.dataDir.pathname).toBe('/app/data/aset/');
    expect(settings.modelsDir.pathname).toBe('/app/models/');
    // Nothing the image copies may be left out of the build context.
    const ignored = readFileSync(new URL('.dockerignore', root), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    for (const pattern of ignored) {
      expect(pattern, '.dockerignore must keep data/ and models/').not.toMatch(
        /^\/?(\*|data|models)(\/.*)?$/,
      );
    }
  });
});
