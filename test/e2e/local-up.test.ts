/**
 * `npm run local` as a person uses it: start it, export the KUBECONFIG it prints, apply the
 * seed's sample with kubectl (default validation), wait for Ready, send a canvas to the edge
 * worker's printed URL, delete the resource, press Ctrl-C (SIGINT to the process group, as a
 * terminal sends it), and find none of the processes it printed still alive.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { kubectlMissing } from '../support/kubectl.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const run = promisify(execFile);

/** Lines the stack prints, and a wait for the first line matching a pattern. */
function lines(child: ChildProcess, stderr: () => string) {
  const seen: string[] = [];
  const waiters: Array<() => void> = [];
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString('utf8');
    const parts = text.split('\n');
    partial = parts.pop() ?? '';
    seen.push(...parts);
    for (const wake of waiters.splice(0)) wake();
  });
  const wait = async (pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (const line of seen) {
        const match = line.match(pattern);
        if (match !== null) return match;
      }
      if ((child.exitCode ?? 0) !== 0)
        throw new Error(
          `npm run local exited ${child.exitCode}:\n${seen.join('\n')}\nstderr:\n${stderr()}`,
        );
      if (Date.now() > deadline)
        throw new Error(`no line matching ${pattern}:\n${seen.join('\n')}`);
      await new Promise<void>((resolve) => {
        waiters.push(resolve);
        setTimeout(resolve, 500);
      });
    }
  };
  return { seen, wait };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(kubectlMissing !== undefined)(
  `npm run local${kubectlMissing === undefined ? '' : ` (skipped: ${kubectlMissing})`}`,
  () => {
    let child: ChildProcess | undefined;
    let stderr = '';
    afterAll(() => {
      // A failed run leaves the group behind: take it down (nothing left is not an error).
      if (child?.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });

    it('stays up for kubectl apply, Ready, a prediction and delete, and leaves no process after Ctrl-C', async () => {
      const { REDIS_URL: _external, ...env } = process.env;
      child = spawn('npm', ['run', '-s', 'local'], {
        cwd: root,
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      const out = lines(child, () => stderr);
      const kubeconfig = (await out.wait(/^ {2}export KUBECONFIG=(\S+)$/, 180_000))[1]!;
      const models = (await out.wait(/^ {2}kubectl apply -f (\S+models\.yaml)$/, 1_000))[1]!;
      const kubectl = (...args: string[]) =>
        run('kubectl', args, { cwd: root, env: { ...process.env, KUBECONFIG: kubeconfig } });

      await kubectl('apply', '-f', models);
      const applied = await kubectl('apply', '-f', 'knative/samples/helmet-detection-demo.yaml');
      expect(applied.stdout).toContain(
        'jointinferenceservice.edgeai.io/helmet-detection-demo created',
      );
      await kubectl('wait', '--for=condition=Ready', 'jis/helmet-detection-demo', '--timeout=120s');

      const edge = (
        await out.wait(/^ready +default\/helmet-detection-demo-edge (\S+)$/, 60_000)
      )[1]!;
      const request = readFileSync(`${dirname(kubeconfig)}/canvas.json`, 'utf8');
      const answer = await fetch(`${edge}/v2/models/small-model/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: request,
      });
      expect(answer.status).toBe(200);
      const body = (await answer.json()) as { outputs: Array<{ name: string; data: unknown[] }> };
      expect(body.outputs.find((o) => o.name === 'tier')?.data[0]).toMatch(/^(edge|cloud)$/);

      // The worker's pino lines, in its own file under the logs directory the stack printed.
      const logs = (await out.wait(/^ {2}logs {8}(\S+) /, 1_000))[1]!;
      // The worker writes its access line once the response has gone out, so it may land a
      // moment after the answer: read the file until it is there (or 10 s have passed).
      const logFile = join(logs, 'default.helmet-detection-demo-edge-00001.log');
      const servedOk = () =>
        existsSync(logFile) &&
        readFileSync(logFile, 'utf8')
          .split('\n')
          .slice(0, -1) // a line still being written has no newline yet
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { path?: string; status?: number })
          .some((l) => l.path === '/v2/models/small-model/infer' && l.status === 200);
      const logDeadline = Date.now() + 10_000;
      while (!servedOk() && Date.now() < logDeadline) await new Promise((r) => setTimeout(r, 100));
      expect(servedOk()).toBe(true);

      await kubectl('delete', 'jis', 'helmet-detection-demo');
      await out.wait(/^gone +default\/helmet-detection-demo-edge$/, 30_000);
      const gone = await kubectl('get', 'jis', '-o', 'name');
      expect(gone.stdout.trim()).toBe('');

      const pids = out.seen.flatMap((line) =>
        [...line.matchAll(/pid (\d+)/g)].map((m) => Number(m[1])),
      );
      expect(pids.length).toBeGreaterThanOrEqual(7); // redis-server, 4 functions, 2 workers
      process.kill(-child.pid!, 'SIGINT');
      // npm itself dies of the SIGINT (as in a terminal); the stack under it shuts down and says so.
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      expect(code === 0 || signal === 'SIGINT', `exit ${code} ${signal}: ${stderr}`).toBe(true);
      await out.wait(/^stopped; logs kept in /, 30_000);
      // The stack's own process (under npm) exits last: give it its moment before counting.
      const deadline = Date.now() + 10_000;
      while (pids.some(alive) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect(pids.filter(alive)).toEqual([]);
      expect(alive(child.pid!)).toBe(false);
    }, 360_000);
  },
);
