/**
 * bench/reconcile: the reconcile-tick controller over 1,000 JointInferenceServices, through
 * client-node against the development API server running in its own process (as a real API
 * server would). Reports the time and API calls to converge from empty, the pass after Knative
 * marks the workers ready, and steady-state ticks. Targets: a steady tick makes 0 writes and at
 * most 1 list call per kind.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pMap from 'p-map';
import { createReconciler } from '../../shared/controller/index.js';
import type { PassReport } from '../../shared/controller/index.js';
import { createKube, loadKubeConfig, meteredKube } from '../../shared/k8s/index.js';
import type { KindName, Verb } from '../../shared/k8s/index.js';
import { createTelemetry } from '../../shared/telemetry/index.js';
import { finish, median, printTable } from '../support/report.js';

const services = Number(process.env['BENCH_SERVICES'] ?? 1000);
const namespaces = 10;
const steadyTicks = 5;

async function startApiServer(): Promise<{ kubeconfig: string; stop(): Promise<void> }> {
  const kubeconfig = join(mkdtempSync(join(tmpdir(), 'edgeai-bench-')), 'kubeconfig');
  const child = fork(
    new URL('../../bin/dev-apiserver.js', import.meta.url),
    ['--port', '0', '--kubeconfig', kubeconfig],
    { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] },
  );
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  if (!chunk.toString().includes('dev API server on') || !existsSync(kubeconfig)) {
    throw new Error(`dev API server did not start: ${chunk.toString()}`);
  }
  return {
    kubeconfig,
    async stop() {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

type Calls = Map<string, number>;

function summarize(calls: Calls) {
  let writes = 0;
  const lists = new Map<string, number>();
  let gets = 0;
  for (const [k, n] of calls) {
    const [verb, kind] = k.split(' ') as [Verb, KindName];
    if (verb === 'list') lists.set(kind, (lists.get(kind) ?? 0) + n);
    else if (verb === 'get') gets += n;
    else writes += n;
  }
  return { writes, gets, lists, maxListsPerKind: Math.max(0, ...lists.values()) };
}

export async function main(): Promise<void> {
  const api = await startApiServer();
  const calls: Calls = new Map();
  const kube = meteredKube(
    createKube(loadKubeConfig({ KUBECONFIG: api.kubeconfig })),
    (verb, kind) => {
      const k = `${verb} ${kind}`;
      calls.set(k, (calls.get(k) ?? 0) + 1);
    },
  );
  const setup = createKube(loadKubeConfig({ KUBECONFIG: api.kubeconfig }));
  const ns = (i: number) => `team-${i % namespaces}`;
  for (let n = 0; n < 10; n += 1)
    await setup.create('node', undefined, { metadata: { name: `edge${n}` } });
  for (let i = 0; i < namespaces; i += 1) {
    for (const model of ['small-model', 'big-model']) {
      await setup.create('model', ns(i), {
        metadata: { name: model },
        spec: { url: `file:///models/${model}.onnx`, format: 'onnx' },
      });
    }
  }
  await pMap(
    Array.from({ length: services }, (_, i) => i),
    (i) =>
      setup.create('jointInferenceService', ns(i), {
        metadata: { name: `svc-${i}` },
        spec: {
          edgeWorker: {
            model: { name: 'small-model' },
            nodeName: `edge${i % 10}`,
            hardExampleAlgorithm: { name: 'Threshold', parameters: { threshold: 0.8 } },
          },
          cloudWorker: { model: { name: 'big-model' } },
        },
      }),
    { concurrency: 16 },
  );

  const reconciler = createReconciler({
    kube,
    settings: { image: 'edgeai:bench', upstreamStatusUrl: undefined, workerSecret: undefined },
    heartbeatMs: 3_600_000,
    log: createTelemetry({ functionName: 'bench', level: 'warn', processMetrics: false }).log,
  });
  const rows: Array<Array<string | number>> = [];
  const tick = async (label: string) => {
    calls.clear();
    const started = performance.now();
    const report: PassReport = await reconciler.tick();
    const ms = performance.now() - started;
    const s = summarize(calls);
    rows.push([
      label,
      Math.round(ms),
      s.writes,
      s.gets,
      [...s.lists.values()].reduce((a, b) => a + b, 0),
      s.maxListsPerKind,
      report.conflicts,
      report.failed,
    ]);
    return { ms, ...s, report };
  };

  // From empty: tick until a tick writes nothing.
  let convergeMs = 0;
  let convergeWrites = 0;
  let convergeTicks = 0;
  for (;;) {
    const t = await tick(`converge ${convergeTicks + 1}`);
    convergeTicks += 1;
    if (t.writes === 0) break;
    convergeMs += t.ms;
    convergeWrites += t.writes;
    if (convergeTicks > 5) throw new Error('did not converge in 5 ticks');
  }
  // Knative Serving's part: every worker Service becomes ready (not counted).
  const workers = await setup.list('knativeService');
  await pMap(
    workers.items,
    (w) =>
      setup.patchStatus(
        { kind: 'knativeService', namespace: w.metadata.namespace, name: w.metadata.name },
        {
          status: {
            observedGeneration: w.metadata.generation,
            conditions: [{ type: 'Ready', status: 'True' }],
          },
        },
      ),
    { concurrency: 16 },
  );
  const readyPass = await tick('workers ready');
  const steady = [];
  for (let i = 0; i < steadyTicks; i += 1) steady.push(await tick(`steady ${i + 1}`));
  await api.stop();

  printTable(
    `reconcile-tick over ${services} JointInferenceServices (${namespaces} namespaces, dev API server in its own process)`,
    ['pass', 'ms', 'writes', 'gets', 'lists', 'max lists/kind', 'conflicts', 'failed'],
    rows,
  );
  const steadyMs = median(steady.map((s) => s.ms));
  const steadyWrites = Math.max(...steady.map((s) => s.writes));
  const steadyLists = Math.max(...steady.map((s) => s.maxListsPerKind));
  finish(
    'reconcile',
    {
      services,
      converge_ms: Math.round(convergeMs),
      converge_writes: convergeWrites,
      converge_ticks: convergeTicks - 1,
      ready_pass_ms: Math.round(readyPass.ms),
      ready_pass_writes: readyPass.writes,
      steady_tick_ms: Math.round(steadyMs),
      steady_tick_writes: steadyWrites,
      steady_tick_max_lists_per_kind: steadyLists,
    },
    {
      steady_tick_writes: { value: steadyWrites, op: '<=', target: 0 },
      steady_tick_max_lists_per_kind: { value: steadyLists, op: '<=', target: 1 },
    },
  );
}
