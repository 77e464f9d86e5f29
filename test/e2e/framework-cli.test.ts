/**
 * Framework parity: functions-framework stays the programming model. Every function has an entry
 * (bin/ff/<name>.ts) that registers it with the framework's `http()`, and the stock CLI
 * (node_modules/.bin/functions-framework, run as a child process on the tsc build) serves it:
 * a control-plane function (upstream-status, with Redis and the development API server) and an
 * inference function (edge-infer, with the committed model), each answering its health
 * endpoint, a binary-mode CloudEvent and a JSON route.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../local/index.js';
import { signReport } from '../../shared/status/index.js';
import { pixels } from '../../shared/training/data.js';
import { startApiServer } from '../support/apiserver.js';
import type { TestApiServer } from '../support/apiserver.js';
import { postEvent } from '../support/http.js';
import { testRedis } from '../support/redis.js';
import type { TestRedis } from '../support/redis.js';
import { helmetDetectionSample } from '../support/samples.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const outDir = join(root, `.test-build-${randomUUID()}`);
const cli = join(root, 'node_modules', '.bin', 'functions-framework');

interface Served {
  base: string;
  /** What the CLI printed on stdout. */
  stdout(): string;
  stop(): Promise<void>;
}

/** The stock CLI serving `target` from its bin/ff entry, ready (readiness 200) or failed. */
async function serveWithCli(target: string, env: Record<string, string>): Promise<Served> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    cli,
    [
      `--target=${target}`,
      `--source=${join(outDir, 'bin', 'ff', `${target}.js`)}`,
      `--port=${port}`,
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { PATH: process.env['PATH'], LOG_LEVEL: 'warn', ...env },
    },
  );
  let stdout = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => (stdout += chunk));
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  };
  // Polled with a bound: the CLI says nothing when it is ready but "Serving function...".
  for (let i = 0; i < 300 && child.exitCode === null; i++) {
    const answer = await fetch(`${base}/health/readiness`).catch(() => undefined);
    if (answer?.status === 200) return { base, stdout: () => stdout, stop };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stop();
  throw new Error(`functions-framework never served ${target} ready; stdout: ${stdout}`);
}

describe('the stock functions-framework CLI serves every function (bin/ff/)', () => {
  beforeAll(async () => {
    await promisify(execFile)('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', outDir], {
      cwd: root,
    });
  }, 180_000);
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('has an entry for each function in functions/', () => {
    const names = readdirSync(join(root, 'functions'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect(names.length).toBeGreaterThan(0);
    for (const name of names) {
      expect(existsSync(join(outDir, 'bin', 'ff', `${name}.js`)), name).toBe(true);
    }
  });

  describe('upstream-status (control plane: Redis and the API server)', () => {
    const token = 'edge0-token-0123456789';
    const ns = 'default';
    const name = 'helmet-detection-demo';
    const subject = `${ns}/jointinferenceservices/${name}`;
    let api: TestApiServer;
    let redis: TestRedis;
    let served: Served;
    beforeAll(async () => {
      api = await startApiServer();
      redis = await testRedis();
      await api.kube.create('node', undefined, { metadata: { name: 'edge0' } });
      await api.kube.create('secret', 'edgeai-system', {
        metadata: { name: 'edgeai-node-edge0' },
        data: { token: Buffer.from(token).toString('base64') },
      });
      await api.kube.create('jointInferenceService', ns, helmetDetectionSample());
      served = await serveWithCli('upstream-status', {
        ...redis.env,
        REDIS_KEY_PREFIX: redis.prefix,
        KUBECONFIG: api.kubeconfigFile,
      });
    }, 60_000);
    afterAll(async () => {
      await served?.stop();
      await redis?.close();
      await api?.close();
    });

    it('is the framework serving it', () => {
      expect(served.stdout()).toContain('Function: upstream-status');
    });

    it('answers its health endpoints', async () => {
      const ready = await fetch(`${served.base}/health/readiness`);
      expect(await ready.json()).toEqual({
        status: 'ready',
        checks: { redis: 'ok', kubernetes: 'ok' },
      });
      expect((await fetch(`${served.base}/health/liveness`)).status).toBe(200);
    });

    it('takes a report on its JSON route', async () => {
      const answer = await fetch(`${served.base}/${subject}/status`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-edgeai-node': 'edge0',
          authorization: `Bearer ${token}`,
        },
        body: JSON.stringify({
          id: 'cli-report-1',
          phase: 'Inference',
          status: 'Running',
          output: { taskInfo: { uploaded: 1, inferenceNumber: 2, hardExampleNumber: 1 } },
        }),
      });
      expect(answer.status, await answer.clone().text()).toBe(200);
      const refused = await fetch(`${served.base}/${subject}/status`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-edgeai-node': 'edge0' },
        body: JSON.stringify({ id: 'cli-report-2', phase: 'Inference', status: 'Running' }),
      });
      expect(refused.status).toBe(401);
    });

    it('takes a signed report as a binary-mode CloudEvent', async () => {
      const data = {
        id: 'cli-event-1',
        phase: 'Inference',
        status: 'Running',
        output: { taskInfo: { uploaded: 2, inferenceNumber: 4, hardExampleNumber: 2 } },
      };
      const time = new Date().toISOString();
      const uploads = async () =>
        (
          (await api.kube.get({ kind: 'jointInferenceService', namespace: ns, name }))['status'] as
            { uploadCount?: number } | undefined
        )?.uploadCount ?? 0;
      expect(await uploads()).toBe(1);
      const answer = await postEvent(
        served.base,
        'io.edgeai.jointinference.status.reported',
        data,
        {
          'ce-id': 'cli-event-1',
          'ce-source': '/edge/edge0',
          'ce-subject': subject,
          'ce-edgeainode': 'edge0',
          'ce-time': time,
          'ce-edgeaisig': signReport(Buffer.from(token), 'cli-event-1', subject, time, data),
        },
      );
      expect(answer.status, await answer.clone().text()).toBe(202);
      // A report carries the node's running totals: the status now shows the event's.
      expect(await uploads()).toBe(2);
    });
  });

  describe('edge-infer (inference: the committed model)', () => {
    let served: Served;
    const image = Array.from({ length: pixels }, (_, i) => (i % 7) / 7);
    beforeAll(async () => {
      served = await serveWithCli('edge-infer', {
        MODEL_URL: new URL('models/edge.onnx', `file://${root}`).href,
        MODEL_ROOT: join(root, 'models'),
        HEM_NAME: 'EdgeOnly',
      });
    }, 60_000);
    afterAll(() => served?.stop());

    it('answers its health endpoints', async () => {
      expect((await fetch(`${served.base}/health/readiness`)).status).toBe(200);
      expect(await (await fetch(`${served.base}/v2/health/live`)).json()).toEqual({ live: true });
    });

    it('answers an OIP inference on its JSON route', async () => {
      const answer = await fetch(`${served.base}/v2/models/edge/infer`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          inputs: [{ name: 'input', shape: [1, pixels], datatype: 'FP32', data: image }],
        }),
      });
      expect(answer.status, await answer.clone().text()).toBe(200);
      const body = (await answer.json()) as { outputs: Array<{ name: string; shape: number[] }> };
      expect(body.outputs[0]).toMatchObject({ name: 'probabilities', shape: [1, 10] });
    });

    it('replies to a binary-mode inference CloudEvent with an event', async () => {
      const answer = await postEvent(served.base, 'io.edgeai.inference.requested', {
        instances: [image],
      });
      expect(answer.status, await answer.clone().text()).toBe(200);
      expect(answer.headers.get('ce-type')).toBe('io.edgeai.inference.completed');
      expect(answer.headers.get('ce-source')).toBe('/apis/edgeai.io/functions/edge-infer');
    });
  });
});
