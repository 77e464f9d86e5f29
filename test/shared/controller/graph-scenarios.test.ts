/**
 * The MLGraph controller end to end through client-node against the development API server
 * (schema validation from the CRD, garbage collection by ownerReference): the test plays Knative
 * Serving's part by marking Services ready. Also reconcile-tick's HTTP function with MLGraph
 * events, and the real kubectl applying and listing an MLGraph.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  createController,
  jointInferenceKind,
  mlGraphKind,
  reconcileTickDefinition,
} from '../../../shared/controller/index.js';
import type { Controller } from '../../../shared/controller/index.js';
import type { GraphObject } from '../../../shared/controller/graph-desired.js';
import { buildServer } from '../../../shared/http/index.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { graphPlan } from '../../../shared/messages/graph-plan.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../../support/http.js';
import type { Listening } from '../../support/http.js';
import { kubectlMissing } from '../../support/kubectl.js';

const ns = 'default';
const name = 'digits';
const settings = { image: 'edgeai:test', upstreamStatusUrl: undefined, workerSecret: 'redis' };

type Spec = { root: string; timeoutMs: number; nodes: Array<Record<string, unknown>> };

/** A router over two models, joined. */
function ensembleSpec(): Spec {
  return {
    root: 'pick',
    timeoutMs: 4000,
    nodes: [
      {
        name: 'pick',
        kind: 'router',
        router: { strategy: { kind: 'thompson' } },
        children: [{ node: 'small' }, { node: 'large' }],
      },
      {
        name: 'small',
        kind: 'model',
        model: { name: 'digits', url: 'http://small.example' },
        children: [{ node: 'merge' }],
      },
      {
        name: 'large',
        kind: 'model',
        model: { name: 'digits', service: 'large-oip' },
        children: [{ node: 'merge' }],
      },
      { name: 'merge', kind: 'join' },
    ],
  };
}

/** What Knative Serving writes once a Service's latest revision is up, for every Service. */
async function markServicesReady(api: TestApiServer): Promise<void> {
  for (const s of (await api.kube.list('knativeService', { namespace: ns })).items) {
    await api.kube.patchStatus(
      { kind: 'knativeService', namespace: ns, name: s.metadata.name },
      {
        status: {
          observedGeneration: s.metadata.generation,
          url: `http://${s.metadata.name}.${ns}.example.com`,
          conditions: [{ type: 'Ready', status: 'True' }],
        },
      },
    );
  }
}

/** The model Service the ensemble names (`large-oip`): any OIP server's Knative Service. */
const createModelService = (api: TestApiServer) =>
  api.kube.create('knativeService', ns, {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Service',
    metadata: { name: 'large-oip', namespace: ns },
    spec: { template: { spec: { containers: [{ image: 'oip-server' }] } } },
  });

const envOf = (service: KubeObject) =>
  Object.fromEntries(
    (
      service['spec'] as {
        template: { spec: { containers: Array<{ env: Array<{ name: string; value: string }> }> } };
      }
    ).template.spec.containers[0]!.env.map((e) => [e.name, e.value]),
  );

describe('the MLGraph controller against the development API server', () => {
  let api: TestApiServer;
  let graphs: Controller;
  let clock = Date.parse('2026-11-22T10:00:00Z');

  const stored = async () =>
    (await api.kube.get({ kind: 'mlGraph', namespace: ns, name })) as GraphObject;
  const ready = async () => (await stored()).status?.conditions?.find((c) => c.type === 'Ready');
  /** The graph's Services (the model Service it names, `large-oip`, is not one). */
  const serviceNames = async () =>
    (await api.kube.list('knativeService', { namespace: ns })).items
      .filter((s) => s.metadata.labels?.['edgeai.io/mlgraph'] !== undefined)
      .map((s) => s.metadata.name)
      .sort();
  const modelService = () => createModelService(api);
  const service = (serviceName: string) =>
    api.kube.get({ kind: 'knativeService', namespace: ns, name: serviceName });
  const markReady = () => markServicesReady(api);

  const setSpec = (spec: unknown) =>
    api.kube.patch({ kind: 'mlGraph', namespace: ns, name }, { spec });

  beforeAll(async () => {
    api = await startApiServer();
  });
  afterAll(() => api.close());

  beforeEach(async () => {
    for (const kind of ['mlGraph', 'knativeService'] as const) {
      for (const item of (await api.kube.list(kind)).items)
        await api.kube.delete({
          kind,
          namespace: item.metadata.namespace,
          name: item.metadata.name,
        });
    }
    await modelService();
    graphs = createController({
      kube: api.kube,
      kinds: [mlGraphKind(settings)],
      heartbeatMs: 3_600_000,
      log: capturedTelemetry('reconcile-tick').log,
      now: () => new Date((clock += 1000)),
    });
  });

  it('deploys the executor and the router (the join runs in the executor), owned by the graph, then is Ready with its URL', async () => {
    const created = await api.kube.create('mlGraph', ns, {
      metadata: { name },
      spec: ensembleSpec(),
    });
    expect(await graphs.tick()).toMatchObject({ objects: 1, failed: 0 });
    // No joiner Service: a join without a url is gathered in the executor.
    expect(await serviceNames()).toEqual(['digits', 'digits-pick']);
    for (const serviceName of await serviceNames()) {
      const s = await service(serviceName);
      expect(s.metadata.ownerReferences).toEqual([
        expect.objectContaining({
          kind: 'MLGraph',
          name,
          uid: created.metadata.uid,
          controller: true,
        }),
      ]);
      expect(s.metadata.labels?.['edgeai.io/mlgraph']).toBe(name);
    }
    const plan = graphPlan.parse(JSON.parse(envOf(await service('digits'))['MLGRAPH_GRAPH']!));
    expect(plan.nodes.find((n) => n.name === 'large')?.url).toBe(
      'http://large-oip.default.svc.cluster.local',
    );
    expect(envOf(await service('digits-pick'))).toMatchObject({
      FUNCTION_TARGET: 'router',
      MLGRAPH_CHILDREN: 'small,large',
    });
    expect(plan.nodes.find((n) => n.name === 'merge')).toMatchObject({ join: { type: 'inner' } });
    expect(plan.nodes.find((n) => n.name === 'merge')?.url).toBeUndefined();
    expect(await ready()).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
    await markReady();
    await graphs.tick();
    expect(await ready()).toMatchObject({ status: 'True', reason: 'Ready' });
    expect((await stored()).status).toMatchObject({
      observedGeneration: 1,
      nodeCount: 4,
      url: 'http://digits.default.example.com',
    });
    api.resetCalls();
    expect(await graphs.tick()).toMatchObject({ writes: 0 });
    expect(await graphs.reconcile('mlGraph', ns, name)).toMatchObject({ writes: 0 });
    expect(api.writes()).toBe(0);
  });

  it('names a model Service the graph needs that does not exist, and is Ready once it does', async () => {
    await api.kube.delete({ kind: 'knativeService', namespace: ns, name: 'large-oip' });
    await api.kube.create('mlGraph', ns, { metadata: { name }, spec: ensembleSpec() });
    await graphs.tick();
    await markReady();
    await graphs.tick();
    // Its own Services are deployed and ready: a request would still fail at that node.
    expect(await serviceNames()).toEqual(['digits', 'digits-pick']);
    expect(await ready()).toEqual(
      expect.objectContaining({
        status: 'False',
        reason: 'ModelNotFound',
        message: 'node large: Knative Service default/large-oip not found',
      }),
    );
    await modelService();
    await graphs.tick();
    expect(await ready()).toMatchObject({ status: 'True', reason: 'Ready' });
  });

  describe('once deployed and ready', () => {
    beforeEach(async () => {
      await api.kube.create('mlGraph', ns, { metadata: { name }, spec: ensembleSpec() });
      await graphs.tick();
      await markReady();
      await graphs.tick();
      expect(await ready()).toMatchObject({ status: 'True' });
    });

    it("recreates a node's deleted Service", async () => {
      await api.kube.delete({ kind: 'knativeService', namespace: ns, name: 'digits-pick' });
      await graphs.reconcile('mlGraph', ns, name);
      expect(await serviceNames()).toContain('digits-pick');
      expect(await ready()).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
    });

    it("updates the router on a strategy change, creates a new node's Service, deletes a removed one's", async () => {
      const spec = ensembleSpec();
      spec.nodes[0]!['router'] = {
        strategy: { kind: 'weighted', weights: { small: 1, large: 4 } },
      };
      // The join is replaced by an outer one under another name (in the executor: no
      // Service), and a router follows it.
      spec.nodes[1]!['children'] = [{ node: 'gather' }];
      spec.nodes[2]!['children'] = [{ node: 'gather' }];
      spec.nodes[3] = {
        name: 'gather',
        kind: 'join',
        join: { type: 'outer', windowMs: 300 },
        children: [{ node: 'tail' }],
      };
      spec.nodes.push({
        name: 'tail',
        kind: 'router',
        router: { strategy: { kind: 'static' } },
        children: [{ node: 'last' }],
      });
      spec.nodes.push({
        name: 'last',
        kind: 'model',
        model: { name: 'x', url: 'http://x.example' },
      });
      const patched = await setSpec(spec);
      expect(patched.metadata.generation).toBe(2);
      await graphs.tick();
      expect(await serviceNames()).toEqual(['digits', 'digits-pick', 'digits-tail']);
      const pick = await service('digits-pick');
      expect(JSON.parse(envOf(pick)['MLGRAPH_ROUTE']!)).toEqual({
        kind: 'weighted',
        weights: { small: 1, large: 4 },
      });
      expect(pick.metadata.annotations?.['edgeai.io/generation']).toBe('2');
      // The router removed again: its Service goes.
      spec.nodes.splice(4, 2);
      spec.nodes[3] = { name: 'gather', kind: 'join', join: { type: 'outer', windowMs: 300 } };
      expect((await setSpec(spec)).metadata.generation).toBe(3);
      await graphs.tick();
      expect(await serviceNames()).toEqual(['digits', 'digits-pick']);
      const events = (await api.kube.list('event', { namespace: ns })).items;
      expect(events.map((e) => e['reason'])).toContain('ServiceDeleted');
      expect(events[0]?.['involvedObject']).toMatchObject({ kind: 'MLGraph', name });
      expect((await stored()).status?.observedGeneration).toBe(3);
    });

    it('names the nodes of an invalid graph, changes nothing, and is Ready again once fixed', async () => {
      const before = await Promise.all((await serviceNames()).map(service));
      const spec = ensembleSpec();
      spec.nodes[3]!['children'] = [{ node: 'small' }];
      await setSpec(spec);
      await graphs.tick();
      const invalid = await ready();
      expect(invalid).toMatchObject({ status: 'False', reason: 'InvalidGraph' });
      expect(invalid?.message).toContain('node small: has 2 parents (pick, merge)');
      expect(await Promise.all((await serviceNames()).map(service))).toEqual(before);
      spec.nodes[3]!['children'] = [{ node: 'ghost' }];
      await setSpec(spec);
      await graphs.tick();
      expect((await ready())?.message).toBe('node merge: child ghost is not a node');
      await setSpec(ensembleSpec());
      await graphs.tick();
      await markReady();
      await graphs.tick();
      expect(await ready()).toMatchObject({ status: 'True', reason: 'Ready' });
    });

    it('never creates a graph whose first spec is invalid, and deploys it once fixed', async () => {
      const spec = ensembleSpec();
      spec.nodes[3]!['children'] = [{ node: 'pick' }];
      await api.kube.create('mlGraph', ns, { metadata: { name: 'loop' }, spec });
      await graphs.reconcile('mlGraph', ns, 'loop');
      const loop = (await api.kube.get({
        kind: 'mlGraph',
        namespace: ns,
        name: 'loop',
      })) as GraphObject;
      expect(loop.status?.conditions?.[0]).toMatchObject({
        type: 'Ready',
        status: 'False',
        reason: 'InvalidGraph',
        message: 'node pick: the root has parents (merge)',
      });
      expect((await serviceNames()).filter((n) => n.startsWith('loop'))).toEqual([]);
      await api.kube.patch(
        { kind: 'mlGraph', namespace: ns, name: 'loop' },
        { spec: ensembleSpec() },
      );
      await graphs.reconcile('mlGraph', ns, 'loop');
      expect((await serviceNames()).filter((n) => n.startsWith('loop'))).toEqual([
        'loop',
        'loop-pick',
      ]);
    });

    it('goes with its Services when deleted (garbage collection), and the tick does not bring them back', async () => {
      await api.kube.delete({ kind: 'mlGraph', namespace: ns, name });
      expect(await serviceNames()).toEqual([]);
      expect(await graphs.tick()).toMatchObject({ objects: 0, writes: 0 });
      expect(await serviceNames()).toEqual([]);
    });
  });
});

describe('reconcile-tick with MLGraph events', () => {
  let api: TestApiServer;
  let fn: Listening;
  const send = (type: string, data: unknown) => postEvent(fn.url, type, data);
  const services = async () =>
    (await api.kube.list('knativeService', { namespace: ns })).items
      .map((s) => s.metadata.name)
      .sort();

  beforeAll(async () => {
    api = await startApiServer();
    const telemetry = capturedTelemetry('reconcile-tick');
    const controller = createController({
      kube: api.kube,
      kinds: [jointInferenceKind(settings), mlGraphKind(settings)],
      heartbeatMs: 3_600_000,
      log: telemetry.log,
    });
    const definition = reconcileTickDefinition({ controller, readiness: [] });
    fn = await listen(
      buildServer(definition, { telemetry, bodyLimitBytes: 1 << 20, readinessTimeoutMs: 1000 }),
    );
  });
  afterAll(async () => {
    await fn.close();
    await api.close();
  });

  it("reconciles the graph of an MLGraph event, and of a graph Service's delete event", async () => {
    const created = await api.kube.create('mlGraph', ns, {
      metadata: { name },
      spec: ensembleSpec(),
    });
    expect((await send('dev.knative.apiserver.resource.add', created)).status).toBe(202);
    expect(await services()).toEqual(['digits', 'digits-pick']);
    const router = await api.kube.get({
      kind: 'knativeService',
      namespace: ns,
      name: 'digits-pick',
    });
    await api.kube.delete({ kind: 'knativeService', namespace: ns, name: 'digits-pick' });
    expect((await send('dev.knative.apiserver.resource.delete', router)).status).toBe(202);
    expect(await services()).toContain('digits-pick');
  });

  it('reports both passes from the tick', async () => {
    const tick = await fetch(`${fn.url}/tick`, { method: 'POST' });
    expect(await tick.json()).toEqual({
      objects: 1,
      writes: 0,
      conflicts: 0,
      failed: 0,
      kinds: {
        jointInferenceService: { objects: 0, writes: 0, conflicts: 0, failed: 0 },
        mlGraph: { objects: 1, writes: 0, conflicts: 0, failed: 0 },
      },
    });
  });

  it('still refuses an object of a kind it does not handle with 400', async () => {
    const answer = await send('dev.knative.apiserver.resource.update', {
      apiVersion: 'edgeai.io/v1alpha1',
      kind: 'MLGraphRun',
      metadata: { name: 'x', namespace: ns },
    });
    expect(answer.status).toBe(400);
    expect(await answer.text()).toMatch(/JointInferenceService, Model, MLGraph/);
  });
});

const exec = promisify(execFile);

describe.skipIf(kubectlMissing !== undefined)(
  `kubectl apply of an MLGraph${kubectlMissing === undefined ? '' : ` (skipped: ${kubectlMissing})`}`,
  () => {
    let api: TestApiServer;
    const kubectl = async (...args: string[]) =>
      (await exec('kubectl', args, { env: { ...process.env, KUBECONFIG: api.kubeconfigFile } }))
        .stdout;

    beforeAll(async () => {
      api = await startApiServer();
    });
    afterAll(() => api.close());

    it('applies the graph, lists it as mlgraphs and mlg with its columns, and deletes it with its Services', async () => {
      const file = join(api.kubeconfigFile, '..', 'graph.json');
      const manifest = {
        apiVersion: 'edgeai.io/v1alpha1',
        kind: 'MLGraph',
        metadata: { name, namespace: ns },
        spec: ensembleSpec(),
      };
      writeFileSync(file, JSON.stringify(manifest));
      expect(await kubectl('apply', '-f', file)).toContain(`mlgraph.edgeai.io/${name} created`);
      await createModelService(api);
      const graphs = createController({
        kube: api.kube,
        kinds: [mlGraphKind(settings)],
        heartbeatMs: 3_600_000,
        log: capturedTelemetry('reconcile-tick').log,
      });
      await graphs.tick();
      await markServicesReady(api);
      await graphs.tick();
      const table = await kubectl('get', 'mlgraphs');
      expect(table).toMatch(/^NAME\s+READY\s+NODES\s+URL\s+AGE\n/);
      expect(table).toMatch(/digits\s+True\s+4\s+http:\/\/digits\.default\.example\.com\s/);
      expect(await kubectl('get', 'mlg', '-o', 'name')).toBe(`mlgraph.edgeai.io/${name}\n`);
      // Applying it again unchanged writes nothing for the controller to do.
      expect(await kubectl('apply', '-f', file)).toContain('unchanged');
      expect(await graphs.tick()).toMatchObject({ writes: 0 });
      await kubectl('delete', 'mlgraph', name);
      const left = await api.kube.list('knativeService', { namespace: ns });
      expect(left.items.map((s) => s.metadata.name)).toEqual(['large-oip']);
    });
  },
);
