/**
 * bench/reconcile: the reconcile-tick controller over 1,000 JointInferenceServices, through
 * client-node against the development API server running in its own process (as a real API
 * server would). Reports the time and API calls to converge from empty, the pass after Knative
 * marks the workers ready, and steady-state ticks; then one ApiServerSource-style event per
 * service (reconcileService), with the API calls and objects each event reads. The cluster has
 * BENCH_NODES nodes (default 1,000), as a real one would; the services use ten of them. Targets:
 * a steady tick makes 0 writes and at most 1 list call per kind; an event reads at most 10
 * objects, whatever the cluster's size.
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
import type { Kube, KindName, Verb } from '../../shared/k8s/index.js';
import { createTelemetry } from '../../shared/telemetry/index.js';
import { finish, median, printTable } from '../support/report.js';

const services = Number(process.env['BENCH_SERVICES'] ?? 1000);
const namespaces = 10;
const steadyTicks = 5;
const clusterNodes = Number(process.env['BENCH_NODES'] ?? 1000);
const eventSamples = Math.min(services, 200);

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
  const metered = meteredKube(
    createKube(loadKubeConfig({ KUBECONFIG: api.kubeconfig })),
    (verb, kind) => {
      const k = `${verb} ${kind}`;
      calls.set(k, (calls.get(k) ?? 0) + 1);
    },
  );
  // Objects the controller reads: what an event costs the API server and the wire.
  let objectsRead = 0;
  const kube: Kube = {
    ...metered,
    async get(ref) {
      const found = await metered.get(ref);
      objectsRead += 1;
      return found;
    },
    async list(kind, options) {
      const listed = await metered.list(kind, options);
      objectsRead += listed.items.length;
      return listed;
    },
  };
  const setup = createKube(loadKubeConfig({ KUBECONFIG: api.kubeconfig }));
  const ns = (i: number) => `team-${i % namespaces}`;
  await pMap(
    Array.from({ length: Math.max(clusterNodes, 10) }, (_, n) => n),
    (n) => setup.create('node', undefined, { metadata: { name: `edge${n}` } }),
    { concurrency: 16 },
  );
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

  // One event per service, one at a time, as a Trigger delivers them (nothing to write).
  calls.clear();
  objectsRead = 0;
  const eventsStarted = performance.now();
  let eventWrites = 0;
  for (let i = 0; i < eventSamples; i += 1) {
    eventWrites += (await reconciler.reconcileService(ns(i), `svc-${i}`)).writes;
  }
  const eventMs = (performance.now() - eventsStarted) / eventSamples;
  const perEvent = summarize(calls);
  const eventCalls =
    (perEvent.gets + [...perEvent.lists.values()].reduce((a, b) => a + b, 0)) / eventSamples;
  const eventObjects = objectsRead / eventSamples;
  await api.stop();

  printTable(
    `reconcile-tick over ${services} JointInferenceServices (${namespaces} namespaces, dev API server in its own process)`,
    ['pass', 'ms', 'writes', 'gets', 'lists', 'max lists/kind', 'conflicts', 'failed'],
    rows,
  );
  printTable(
    `one event per service (${eventSamples} services, ${clusterNodes} nodes in the cluster)`,
    ['per event', 'value'],
    [
      ['ms', eventMs.toFixed(2)],
      ['API calls', eventCalls.toFixed(2)],
      ['gets', (perEvent.gets / eventSamples).toFixed(2)],
      [
        'lists',
        ([...perEvent.lists.values()].reduce((a, b) => a + b, 0) / eventSamples).toFixed(2),
      ],
      ['objects read', eventObjects.toFixed(1)],
      ['writes', (eventWrites / eventSamples).toFixed(2)],
    ],
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
      cluster_nodes: clusterNodes,
      event_ms: Number(eventMs.toFixed(2)),
      event_api_calls: Number(eventCalls.toFixed(2)),
      event_objects_read: Number(eventObjects.toFixed(1)),
      event_writes: eventWrites,
    },
    {
      event_objects_read: { value: eventObjects, op: '<=', target: 10 },
      steady_tick_writes: { value: steadyWrites, op: '<=', target: 0 },
      steady_tick_max_lists_per_kind: { value: steadyLists, op: '<=', target: 1 },
    },
  );
}
