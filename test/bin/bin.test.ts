/**
 * The programs in bin/, compiled by tsc (tsconfig.build.json) and bundled as the image bundles
 * them (`npm run bundle`), run with node: the container entry point refuses a FUNCTION_TARGET
 * that names no function and serves the inference functions from any working directory, and
 * the development API server writes a kubeconfig that client-node uses as it is.
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { policyNames } from '../../shared/aset/types.js';
import { freePort } from '../../local/index.js';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testRedis } from '../support/redis.js';

const run = promisify(execFile);
const root = new URL('../../', import.meta.url);

/**
 * Waits until the function says it is ready (Redis connected): it listens before its client
 * is, and a request in that gap is a 503, as it should be.
 */
async function readiness(base: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const answer = await fetch(`${base}/health/readiness`).catch(() => undefined);
    if (answer?.status === 200) return;
    await sleep(50);
  }
  throw new Error(`${base} never became ready`);
}

describe('bin', () => {
  // Inside the project, so the compiled code resolves node_modules and "type": "module".
  const outDir = join(fileURLToPath(root), `.test-build-${randomUUID()}`);
  const entries = {
    tsc: join(outDir, 'bin', 'serve.js'),
    bundle: join(outDir, 'bundle', 'serve.mjs'),
  };
  beforeAll(async () => {
    await run('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', outDir], { cwd: root });
    await run('npm', ['run', '-s', 'bundle', '--', `--outdir=${join(outDir, 'bundle')}`], {
      cwd: root,
    });
  }, 120_000);
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it.each([
    [{}, /FUNCTION_TARGET must name one of: .*; got nothing/],
    [{ FUNCTION_TARGET: 'no-such-fn' }, /FUNCTION_TARGET must name one of: .*; got no-such-fn/],
    [{ FUNCTION_TARGET: '../../etc' }, /FUNCTION_TARGET: must be a kebab-case function name/],
    [{ PORT: 'http' }, /PORT: /],
  ])('exits 1 with a clear message for %o', async (env, message) => {
    const failure = await run('node', [entries.tsc], {
      env: { PATH: process.env['PATH'], ...env },
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(message);
  });

  it('knows every function in functions/', async () => {
    const failure = await run('node', [entries.bundle], {
      env: { PATH: process.env['PATH'] },
    }).then(
      () => undefined,
      (err: { stderr: string }) => err,
    );
    const dirs = readdirSync(new URL('functions/', root), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect(failure?.stderr).toContain(`one of: ${dirs.sort().join(', ')};`);
  });

  it.each([
    ['tsc', 'edge-infer', 'edge', 'edge.onnx'],
    ['tsc', 'cloud-infer', 'cloud', 'cloud.onnx'],
    ['bundle', 'edge-infer', 'edge', 'edge.onnx'],
    ['bundle', 'cloud-infer', 'cloud', 'cloud.onnx'],
  ] as const)(
    'the %s build serves %s from another working directory (the container command, any cwd)',
    async (build, target, model, file) => {
      const port = await freePort();
      const child = spawn('node', [entries[build]], {
        cwd: tmpdir(),
        stdio: ['ignore', 'pipe', 'inherit'],
        env: {
          PATH: process.env['PATH'],
          FUNCTION_TARGET: target,
          PORT: String(port),
          MODEL_URL: new URL(`models/${file}`, root).href,
          MODEL_ROOT: fileURLToPath(new URL('models/', root)),
          HEM_NAME: 'EdgeOnly',
          LOG_LEVEL: 'warn',
        },
      });
      try {
        let answer: Response | undefined;
        for (let i = 0; i < 100 && answer === undefined; i++) {
          await sleep(100);
          answer = await fetch(`http://127.0.0.1:${port}/v2/models/${model}/infer`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              inputs: [
                { name: 'input', shape: [1, 784], datatype: 'FP32', data: new Array(784).fill(0) },
              ],
            }),
          }).catch(() => undefined);
        }
        expect(answer?.status).toBe(200);
        const body = (await answer!.json()) as {
          outputs: Array<{ name: string; shape: number[] }>;
        };
        expect(body.outputs[0]).toMatchObject({ name: 'probabilities', shape: [1, 10] });
      } finally {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    },
    30_000,
  );

  it('the bundle serves aset-scheduler with the trained full-edge network, over HTTP and events', async () => {
    const redis = await testRedis();
    const port = await freePort();
    const token = 'monitoring-agent-token-0123456789';
    const child = spawn('node', [entries.bundle], {
      // The image's working directory holds data/aset and models, as the repository root does.
      cwd: fileURLToPath(root),
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        PATH: process.env['PATH'],
        FUNCTION_TARGET: 'aset-scheduler',
        PORT: String(port),
        ...redis.env,
        REDIS_KEY_PREFIX: redis.prefix,
        ASET_TOPOLOGY: 'full-edge',
        ASET_REPORT_TOKEN: token,
        ASET_ENDPOINT_TEMPLATE: 'http://{variant}.{cluster}.example',
        LOG_LEVEL: 'warn',
      },
    });
    const base = `http://127.0.0.1:${port}`;
    const stream = {
      scheduler: 'ap-0',
      task: 'object-detection',
      maxDelayMs: 95,
      minAccuracy: 10,
      rate: 5,
      size: 0.5,
      durationS: 10,
    };
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    try {
      await readiness(base);
      const first = await post('/v1/streams', { id: 'cam-1', ...stream });
      expect(first.status).toBe(201);
      const placement = (await first.json()) as {
        worker: { variant: string; cluster: string };
        policy: string;
        endpoint: string;
      };
      expect(policyNames).toContain(placement.policy);
      expect(placement.endpoint).toBe(
        `http://${placement.worker.variant}.${placement.worker.cluster}.example`,
      );
      const again = await post('/v1/streams', { id: 'cam-1', ...stream });
      expect(again.status).toBe(200);
      expect(await again.json()).toEqual(placement);

      const event = await post(
        '/',
        { id: 'cam-2', ...stream },
        {
          'ce-specversion': '1.0',
          'ce-id': 'e-1',
          'ce-source': '/test/clients',
          'ce-type': 'io.edgeai.aset.stream.requested',
        },
      );
      expect(event.status).toBe(200);
      expect(event.headers.get('ce-type')).toBe('io.edgeai.aset.stream.bound');
      expect(event.headers.get('ce-subject')).toBe('cam-2');

      const invalid = await post('/v1/streams', { id: 'cam-3', ...stream, rate: undefined });
      expect(invalid.status).toBe(400);
      expect(await invalid.text()).toContain('rate');

      const report = {
        id: 'r-1',
        reports: [placement.worker].map(({ variant, cluster }) => ({
          variant,
          cluster,
          responses: 7,
        })),
      };
      expect((await post('/v1/responses', report)).status).toBe(401);
      expect(
        (await post('/v1/responses', report, { authorization: `Bearer ${token}` })).status,
      ).toBe(202);
      const unknown = {
        id: 'r-2',
        reports: [{ variant: 'nope', cluster: 'cloud-0', responses: 1 }],
      };
      const refused = await post('/v1/responses', unknown, { authorization: `Bearer ${token}` });
      expect(refused.status).toBe(400);
      expect(await refused.text()).toContain("no worker runs variant 'nope' on cluster 'cloud-0'");

      const status = (await (await fetch(`${base}/v1/scheduler`)).json()) as {
        topology: string;
        bindings: number;
        controller: string;
      };
      expect(status).toMatchObject({ topology: 'full-edge', bindings: 2, controller: 'ASET' });

      expect((await fetch(`${base}/v1/streams/cam-1`, { method: 'DELETE' })).status).toBe(200);
      expect((await fetch(`${base}/v1/streams/cam-1`, { method: 'DELETE' })).status).toBe(404);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/edgeai_aset_streams_total\{[^}]*outcome="bound"[^}]*\} 2\n/);
      // The first request started the first window: its policy was chosen once.
      expect(metrics).toMatch(/edgeai_aset_windows_total\{[^}]*policy="[a-z-]+"[^}]*\} 1\n/);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
      await redis.close();
    }
  }, 30_000);

  it.each([
    [
      'router',
      { MLGRAPH_CHILDREN: 'small,large', MLGRAPH_ROUTE: '{"kind":"thompson"}' },
      {},
      (answer: Response) =>
        expect(['small', 'large']).toContain(answer.headers.get('mlgraph-route')),
    ],
    [
      'joiner',
      {},
      { 'mlgraph-source': 'small', 'mlgraph-pending-requests': '0' },
      async (answer: Response) =>
        expect(await answer.json()).toMatchObject({ puid: 'bin-1', partial: false }),
    ],
  ] as const)(
    'the bundle serves %s with its settings from the environment',
    async (target, env, headers, check) => {
      const redis = await testRedis();
      const port = await freePort();
      const child = spawn('node', [entries.bundle], {
        cwd: tmpdir(),
        stdio: ['ignore', 'pipe', 'inherit'],
        env: {
          PATH: process.env['PATH'],
          FUNCTION_TARGET: target,
          PORT: String(port),
          ...redis.env,
          REDIS_KEY_PREFIX: redis.prefix,
          K_SERVICE: `${target}-node`,
          LOG_LEVEL: 'warn',
          ...env,
        },
      });
      try {
        await readiness(`http://127.0.0.1:${port}`);
        const answer = await fetch(`http://127.0.0.1:${port}/predict`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'mlgraph-puid': 'bin-1', ...headers },
          body: JSON.stringify({ instances: [1] }),
        });
        expect(answer.status).toBe(200);
        await check(answer);
      } finally {
        child.kill('SIGTERM');
        await once(child, 'exit');
        await redis.close();
      }
    },
    30_000,
  );

  it('dev-apiserver serves client-node through the kubeconfig it writes, and keeps a snapshot', async () => {
    const config = join(outDir, 'kubeconfig');
    const snapshot = join(outDir, 'snapshot.json');
    const start = () =>
      spawn(
        'node',
        [
          join(outDir, 'bin', 'dev-apiserver.js'),
          '--port',
          '0',
          '--kubeconfig',
          config,
          '--snapshot',
          snapshot,
        ],
        {
          stdio: 'ignore',
        },
      );
    const ready = async () => {
      for (let i = 0; i < 100 && !existsSync(config); i++) await sleep(50);
      const kc = new KubeConfig();
      kc.loadFromString(readFileSync(config, 'utf8'));
      return kc.makeApiClient(CoreV1Api);
    };
    let child = start();
    const api = await ready();
    await api.createNode({ body: { metadata: { name: 'edge0' } } });
    child.kill('SIGTERM');
    await once(child, 'exit');
    rmSync(config);
    child = start();
    try {
      const again = await ready();
      const nodes = await again.listNode();
      expect(nodes.items.map((n) => n.metadata?.name)).toEqual(['edge0']);
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
});
