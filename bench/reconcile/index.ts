/**
 * bench/reconcile: the reconcile-tick controller over 1,000 JointInferenceServices, through
 * client-node against the development API server running in its own process (as a real API
 * server would). Reports the time and API calls to converge from empty, the pass after Knative
 * marks the workers ready, and steady-state ticks; then one ApiServerSource-style event per
 * service (reconcile), with the API calls and objects each event reads. The cluster has
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
import { createController, jointInferenceKind } from '../../shared/controller/index.js';
import type { Controller, PassReport } from '../../shared/controller/index.js';
import { createKube, loadKubeConfig, meteredKube } from '../../shared/k8s/index.js';
import type { Kube, KindName, Verb } from '../../shared/k8s/index.js';
import { createTelemetry } from '../../shared/telemetry/index.js';
import { finish, median, printTable } from '../support/report.js';
import type { Target } from '../support/report.js';

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

/** List calls over every kind. */
function totalLists(lists: ReadonlyMap<string, number>): number {
  return [...lists.values()].reduce((a, b) => a + b, 0);
}

/** What the controller's client has done since the last reset. */
interface Meter {
  calls: Calls;
  /** Objects the controller reads: what an event costs the API server and the wire. */
  objectsRead: number;
}

/** The controller's client: every call counted by verb and kind, every object read counted. */
function meteredClient(kubeconfig: string, meter: Meter): Kube {
  const metered = meteredKube(
    createKube(loadKubeConfig({ KUBECONFIG: kubeconfig })),
    (verb, kind) => {
      const k = `${verb} ${kind}`;
      meter.calls.set(k, (meter.calls.get(k) ?? 0) + 1);
    },
  );
  return {
    ...metered,
    async get(ref) {
      const found = await metered.get(ref);
      meter.objectsRead += 1;
      return found;
    },
    async list(kind, options) {
      const listed = await metered.list(kind, options);
      meter.objectsRead += listed.items.length;
      return listed;
    },
  };
}

const ns = (i: number) => `team-${i % namespaces}`;

/** The cluster before the first tick: the nodes, two Models per namespace, the services. */
async function seedCluster(setup: Kube): Promise<void> {
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
}

/** The reconciler under test, its client's meter and the tick table's rows so far. */
interface Ticks {
  reconciler: Controller;
  meter: Meter;
  rows: Array<Array<string | number>>;
}

/** One timed tick, its API calls counted and its row added to the table. */
async function tick(ticks: Ticks, label: string) {
  ticks.meter.calls.clear();
  const started = performance.now();
  const report: PassReport = await ticks.reconciler.tick();
  const ms = performance.now() - started;
  const s = summarize(ticks.meter.calls);
  ticks.rows.push([
    label,
    Math.round(ms),
    s.writes,
    s.gets,
    totalLists(s.lists),
    s.maxListsPerKind,
    report.conflicts,
    report.failed,
  ]);
  return { ms, ...s, report };
}

type Tick = Awaited<ReturnType<typeof tick>>;

/** Time and writes until convergence; `ticks` counts the tick that wrote nothing too. */
interface Converged {
  ms: number;
  writes: number;
  ticks: number;
}

/** From empty: tick until a tick writes nothing. */
async function converge(ticks: Ticks): Promise<Converged> {
  let ms = 0;
  let writes = 0;
  let count = 0;
  for (;;) {
    const t = await tick(ticks, `converge ${count + 1}`);
    count += 1;
    if (t.writes === 0) break;
    ms += t.ms;
    writes += t.writes;
    if (count > 5) throw new Error('did not converge in 5 ticks');
  }
  return { ms, writes, ticks: count };
}

/** Knative Serving's part: every worker Service becomes ready (not counted). */
async function markWorkersReady(setup: Kube): Promise<void> {
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
}

/** The events' figures: per event, except `writes` (over all of them). */
interface Events {
  ms: number;
  calls: number;
  gets: number;
  lists: number;
  objects: number;
  writes: number;
}

/** One event per service, one at a time, as a Trigger delivers them (nothing to write). */
async function measureEvents(reconciler: Controller, meter: Meter): Promise<Events> {
  meter.calls.clear();
  meter.objectsRead = 0;
  const started = performance.now();
  let writes = 0;
  for (let i = 0; i < eventSamples; i += 1) {
    writes += (await reconciler.reconcile('jointInferenceService', ns(i), `svc-${i}`)).writes;
  }
  const ms = (performance.now() - started) / eventSamples;
  const perEvent = summarize(meter.calls);
  return {
    ms,
    calls: (perEvent.gets + totalLists(perEvent.lists)) / eventSamples,
    gets: perEvent.gets / eventSamples,
    lists: totalLists(perEvent.lists) / eventSamples,
    objects: meter.objectsRead / eventSamples,
    writes,
  };
}

function printEvents(events: Events): void {
  printTable(
    `one event per service (${eventSamples} services, ${clusterNodes} nodes in the cluster)`,
    ['per event', 'value'],
    [
      ['ms', events.ms.toFixed(2)],
      ['API calls', events.calls.toFixed(2)],
      ['gets', events.gets.toFixed(2)],
      ['lists', events.lists.toFixed(2)],
      ['objects read', events.objects.toFixed(1)],
      ['writes', (events.writes / eventSamples).toFixed(2)],
    ],
  );
}

/** The JSON line's figures and targets. */
function reconcileFigures(
  converged: Converged,
  readyPass: Tick,
  steady: readonly Tick[],
  events: Events,
): { figures: Record<string, number>; targets: Record<string, Target> } {
  const steadyMs = median(steady.map((s) => s.ms));
  const steadyWrites = Math.max(...steady.map((s) => s.writes));
  const steadyLists = Math.max(...steady.map((s) => s.maxListsPerKind));
  return {
    figures: {
      services,
      converge_ms: Math.round(converged.ms),
      converge_writes: converged.writes,
      converge_ticks: converged.ticks - 1,
      ready_pass_ms: Math.round(readyPass.ms),
      ready_pass_writes: readyPass.writes,
      steady_tick_ms: Math.round(steadyMs),
      steady_tick_writes: steadyWrites,
      steady_tick_max_lists_per_kind: steadyLists,
      cluster_nodes: clusterNodes,
      event_ms: Number(events.ms.toFixed(2)),
      event_api_calls: Number(events.calls.toFixed(2)),
      event_objects_read: Number(events.objects.toFixed(1)),
      event_writes: events.writes,
    },
    targets: {
      event_objects_read: { value: events.objects, op: '<=', target: 10 },
      steady_tick_writes: { value: steadyWrites, op: '<=', target: 0 },
      steady_tick_max_lists_per_kind: { value: steadyLists, op: '<=', target: 1 },
    },
  };
}

export async function main(): Promise<void> {
  const api = await startApiServer();
  const meter: Meter = { calls: new Map(), objectsRead: 0 };
  const kube = meteredClient(api.kubeconfig, meter);
  const setup = createKube(loadKubeConfig({ KUBECONFIG: api.kubeconfig }));
  await seedCluster(setup);

  const reconciler = createController({
    kube,
    kinds: [
      jointInferenceKind({
        image: 'edgeai:bench',
        upstreamStatusUrl: undefined,
        workerSecret: undefined,
      }),
    ],
    heartbeatMs: 3_600_000,
    log: createTelemetry({ functionName: 'bench', level: 'warn', processMetrics: false }).log,
  });
  const ticks: Ticks = { reconciler, meter, rows: [] };
  const converged = await converge(ticks);
  await markWorkersReady(setup);
  const readyPass = await tick(ticks, 'workers ready');
  const steady: Tick[] = [];
  for (let i = 0; i < steadyTicks; i += 1) steady.push(await tick(ticks, `steady ${i + 1}`));
  const events = await measureEvents(reconciler, meter);
  await api.stop();

  printTable(
    `reconcile-tick over ${services} JointInferenceServices (${namespaces} namespaces, dev API server in its own process)`,
    ['pass', 'ms', 'writes', 'gets', 'lists', 'max lists/kind', 'conflicts', 'failed'],
    ticks.rows,
  );
  printEvents(events);
  const { figures, targets } = reconcileFigures(converged, readyPass, steady, events);
  finish('reconcile', figures, targets);
}
