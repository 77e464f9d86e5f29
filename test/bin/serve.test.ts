/**
 * The container entry point, compiled as the image compiles it (tsconfig.build.json) and run
 * with node: it refuses a FUNCTION_TARGET that names no built function, saying which exist.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('../../', import.meta.url);

describe('bin/serve', () => {
  // Inside the project, so the compiled code resolves node_modules and "type": "module".
  const outDir = join(fileURLToPath(root), `.test-build-${randomUUID()}`);
  beforeAll(async () => {
    await run('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', outDir], { cwd: root });
  }, 120_000);
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it.each([
    [{}, /FUNCTION_TARGET must name one of: .*; got nothing/],
    [{ FUNCTION_TARGET: 'no-such-fn' }, /FUNCTION_TARGET must name one of: .*; got no-such-fn/],
    [{ FUNCTION_TARGET: '../../etc' }, /FUNCTION_TARGET: must be a kebab-case function name/],
    [{ PORT: 'http' }, /PORT: /],
  ])('exits 1 with a clear message for %o', async (env, message) => {
    const failure = await run('node', [join(outDir, 'bin', 'serve.js')], {
      env: { PATH: process.env['PATH'], ...env },
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(message);
  });
});
