/**
 * What an inference worker's container loads before its first prediction, read from the image
 * bundle's metafile (built as `npm run bundle` builds it): the entry, what the entry loads for
 * every function (config, the HTTP front, telemetry, the onnxruntime thread), and the function's
 * own chunk, each with the chunks they import statically. edge-infer and cloud-infer without
 * Redis, a cloud or a sink load no Redis client (ioredis), no CloudEvents SDK and no retry
 * library (cockatiel): those load when a setting asks for them (shared/inference/workers.ts) or
 * when the first request carrying an event comes (shared/http/handler.ts), and prom-client when
 * metrics are first used (shared/telemetry). Functions that do use Redis at start still load
 * ioredis, so the check is not vacuous. And the bundled worker, run as the image runs it, still
 * answers its first CloudEvent and its first scrape (esbuild's output for on-demand imports is
 * not Node's).
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildBundle, staticClosure } from '../../bench/support/bundle-graph.js';
import type { Metafile } from '../../bench/support/bundle-graph.js';
import { freePort } from '../../local/index.js';
import { postEvent } from '../support/http.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** The source modules in the chunks reachable from `start` through static imports. */
function loadedModules(meta: Metafile, start: readonly string[]): string[] {
  const modules = new Set<string>();
  for (const chunk of staticClosure(meta, start)) {
    for (const [input, { bytesInOutput }] of Object.entries(meta.outputs[chunk]!.inputs)) {
      if (bytesInOutput > 0) modules.add(input);
    }
  }
  return [...modules];
}

/** What a function's process loads at start: see the file comment. */
function startModules(meta: Metafile, name: string): string[] {
  const outputs = Object.entries(meta.outputs);
  const entry = outputs.find(([, o]) => o.entryPoint === 'bin/serve.ts');
  const own = outputs.find(([, o]) => o.entryPoint === `functions/${name}/index.ts`)?.[0];
  if (entry === undefined || own === undefined) throw new Error(`no chunk for ${name}`);
  const functionChunks = new Set(
    outputs.filter(([, o]) => o.entryPoint?.startsWith('functions/') === true).map(([p]) => p),
  );
  // bin/serve.ts's own dynamic imports (config, http, telemetry, onnx-runtime), not the other
  // functions'.
  const shared = entry[1].imports
    .filter((edge) => edge.kind === 'dynamic-import' && !functionChunks.has(edge.path))
    .map((edge) => edge.path);
  return loadedModules(meta, [entry[0], ...shared, own]);
}

const optional = [
  'node_modules/ioredis/',
  'node_modules/cloudevents/',
  'node_modules/cockatiel/',
  'node_modules/prom-client/',
];

describe('an inference worker at start', () => {
  let meta: Metafile;
  beforeAll(async () => {
    meta = await buildBundle(root);
  }, 120_000);

  it.each(['edge-infer', 'cloud-infer'])(
    '%s loads no Redis client, CloudEvents SDK, retry library or metrics library',
    (name) => {
      const modules = startModules(meta, name);
      expect(modules.some((m) => m.startsWith('shared/inference/pool.ts'))).toBe(true);
      expect(optional.filter((prefix) => modules.some((m) => m.includes(prefix)))).toEqual([]);
    },
  );

  it('loads them where they are used: ioredis for a function on Redis, all three on demand', () => {
    expect(startModules(meta, 'router').some((m) => m.includes('node_modules/ioredis/'))).toBe(
      true,
    );
    const bundled = Object.values(meta.outputs).flatMap((o) => Object.keys(o.inputs));
    for (const prefix of optional) expect(bundled.some((m) => m.includes(prefix))).toBe(true);
  });
});

describe('the bundled edge worker', () => {
  let child: ChildProcess;
  let base: string;
  const one = {
    inputs: [{ name: 'input', shape: [1, 784], datatype: 'FP32', data: Array(784).fill(0.25) }],
  };

  beforeAll(async () => {
    const meta = await buildBundle(root);
    const entry = Object.entries(meta.outputs).find(([, o]) => o.entryPoint === 'bin/serve.ts');
    if (entry === undefined) throw new Error('no entry in the metafile');
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, [resolve(root, entry[0])], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        // The bundle is built outside the repository: onnxruntime-node (external) from here.
        NODE_PATH: resolve(root, 'node_modules'),
        FUNCTION_TARGET: 'edge-infer',
        PORT: String(port),
        MODEL_URL: new URL('../../models/edge.onnx', import.meta.url).href,
        MODEL_ROOT: fileURLToPath(new URL('../../models/', import.meta.url)),
        HEM_NAME: 'EdgeOnly',
        LOG_LEVEL: 'warn',
      },
    });
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the worker exited with ${child.exitCode}`);
      const ready = await fetch(`${base}/health/readiness`).catch(() => undefined);
      if (ready?.status === 200) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  }, 120_000);
  afterAll(async () => {
    if (child.exitCode !== null) return;
    child.kill('SIGTERM');
    await once(child, 'exit');
  });

  it('answers its first CloudEvent, then its first scrape with what it counted', async () => {
    const event = await postEvent(`${base}/`, 'io.edgeai.inference.requested', one);
    expect(event.status).toBe(200);
    expect(event.headers.get('ce-type')).toBe('io.edgeai.inference.completed');
    const infer = await fetch(`${base}/v2/models/edge/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(one),
    });
    expect(infer.status).toBe(200);
    await infer.arrayBuffer();
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    const text = await metrics.text();
    expect(text).toMatch(
      /edgeai_requests_total\{kind="io\.edgeai\.inference\.requested",status="200",function="edge-infer"\} 1/,
    );
    expect(text).toMatch(
      /edgeai_requests_total\{kind="POST \/v2\/models\/:model\/infer",status="200",function="edge-infer"\} 1/,
    );
    expect(text).toMatch(/edgeai_inference_decisions_total\{[^}]*\} 2/);
    expect(text).toMatch(/process_cpu_user_seconds_total\{function="edge-infer"\} /);
    expect(child.exitCode).toBe(null);
  });
});
