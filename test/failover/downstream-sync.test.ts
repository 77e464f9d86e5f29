/**
 * downstream-sync delivering tasks to 20 edge nodes while Redis fails over: two downstream-sync
 * replicas over real HTTP take the ApiServerSource events of 65 JointInferenceServices (three per
 * node, eight on the hot node edge-00): an add, four spec updates, and for one service per node a
 * delete. Twenty edge consumers read their node's stream through the consumer group as the edge
 * does (read, apply, acknowledge). The Sentinel master, or the cluster master of edge-00's
 * stream, is SIGKILLed after a quarter of the events; every 503 is sent again, as Knative
 * redelivers, and the edge retries its refused reads and acknowledgements.
 *
 * What the design promises (docs/control-plane.md, shared/sync/streams.ts): each version of a service is
 * appended to a node's stream once ("redelivered ... events append nothing twice"), and an entry
 * stays pending until acknowledged (at least once). So every version must reach its node's
 * consumer (nothing lost), and no version may reach it in two stream entries (nothing twice).
 * The same entry read again, because its acknowledgement died with the master, is the consumer
 * group's at-least-once, which the edge recognises by the entry id: not a second application.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer, createHttpClient } from '../../shared/http/index.js';
import type { KubeObject } from '../../shared/k8s/index.js';
import { nodeKeys } from '../../shared/messages/edge-task.js';
import { seededRandom } from '../../shared/random/index.js';
import type { RedisClient } from '../../shared/redis/index.js';
import {
  createDownstream,
  createLocalControllerClient,
  createTaskConsumer,
  createTaskStreams,
  downstreamSyncDefinition,
} from '../../shared/sync/index.js';
import type { DeliveredTask, TaskConsumer } from '../../shared/sync/index.js';
import { startApiServer } from '../support/apiserver.js';
import type { TestApiServer } from '../support/apiserver.js';
import { capturedTelemetry, listen, postEvent } from '../support/http.js';
import type { Listening } from '../support/http.js';
import { helmetDetectionSample } from '../support/samples.js';
import { report, retrying, startFailoverRedis } from './redis-failover.js';
import type { FailoverRedis, Topology } from './redis-failover.js';

const ns = 'default';
const nodes = Array.from({ length: 20 }, (_, i) => `edge-${String(i).padStart(2, '0')}`);
/** The node most services run on: its stream's master is the one killed on the cluster. */
const hotNode = nodes[0]!;
const generations = 5;

interface Service {
  node: string;
  name: string;
  /** Deleted after its last update (the stream then ends with a delete). */
  deleted: boolean;
}

const services: Service[] = nodes.flatMap((node) =>
  Array.from({ length: node === hotNode ? 8 : 3 }, (_, i) => ({
    node,
    name: `${node}-s${i}`,
    deleted: i === 0,
  })),
);
/** Events sent: an add and the updates of every service, and the deletes. */
const operations = services.reduce((n, s) => n + generations + (s.deleted ? 1 : 0), 0);

/** What the senders were answered, and so what each node must get. */
interface Run {
  counter: { unavailable: number };
  /**
   * Throws once a Redis client has ended for good (ioredis status 'end': every command fails
   * "Connection is closed." and it never reconnects), which retrying would only wait out.
   */
  alive(): void;
  /** node -> every version ("<service> <operation> <uid>:<generation>") it must be delivered. */
  expected: Map<string, Set<string>>;
  /** node -> service -> the version ("<operation> <uid>:<generation>") it must end with. */
  last: Map<string, Map<string, string>>;
  /** When every event had been answered 200 or 202; undefined before. */
  sentAt: number | undefined;
}

/** One edge node as its consumer saw its stream. */
interface EdgeNode {
  node: string;
  /** version -> the stream entries it came in (more than one is a version appended twice). */
  entries: Map<string, Set<string>>;
  /** service -> the version the edge holds, from the latest entry in stream order. */
  held: Map<string, { version: string; entryId: string }>;
  /** Entries read again after they were applied (an acknowledgement lost with the master). */
  redelivered: number;
  /** Pending entries the capped stream trimmed before they were applied (consumer's `lost`). */
  trimmed: number;
}

/** service -> "<uid>:<generation>" (a node's `current` hash, read). */
type Versions = Record<string, string>;
type EventKind = 'add' | 'update' | 'delete';
type Send = (kind: EventKind, object: KubeObject) => Promise<void>;

/** Stream entry ids ("<ms>-<seq>") in stream order. */
function after(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am !== bm ? am > bm : as > bs;
}

/** Applies a batch as the edge does: the newest entry of a service (in stream order) wins. */
function apply(edge: EdgeNode, tasks: readonly DeliveredTask[]): void {
  for (const task of tasks) {
    const service = `${task.namespace}/${task.name}`;
    const state = `${task.operation} ${task.uid}:${task.generation}`;
    const version = `${service} ${state}`;
    const ids = edge.entries.get(version) ?? new Set<string>();
    if (ids.has(task.entryId)) edge.redelivered += 1;
    ids.add(task.entryId);
    edge.entries.set(version, ids);
    const held = edge.held.get(service);
    if (held === undefined || after(task.entryId, held.entryId)) {
      edge.held.set(service, { version: state, entryId: task.entryId });
    }
  }
}

/**
 * The edge's loop: read (blocking briefly), apply, acknowledge, until the senders are done and
 * every version sent for the node has arrived (or a minute later); then drain what is left, which
 * can only be a second entry of a version already applied.
 */
async function runEdge(edge: EdgeNode, consumer: TaskConsumer, run: Run): Promise<void> {
  const turn = async (blockMs?: number) => {
    const batch = await retrying(async () => {
      run.alive();
      return consumer.next(32, blockMs);
    }, run.counter);
    edge.trimmed += batch.lost;
    apply(edge, batch.tasks);
    // Applied, then acknowledged: a crash in between gets the entries again.
    await retrying(async () => {
      run.alive();
      return consumer.ack(batch.tasks.map((t) => t.entryId));
    }, run.counter);
    return batch.tasks.length;
  };
  for (;;) {
    const wanted = run.expected.get(edge.node) ?? new Set<string>();
    if (run.sentAt !== undefined) {
      if ([...wanted].every((v) => edge.entries.has(v))) break;
      if (Date.now() > run.sentAt + 60_000) break;
    }
    await turn(200);
  }
  while ((await turn()) > 0);
}

/** One service's life as its ApiServerSource tells it; each event sent until answered. */
async function serviceLife(
  api: TestApiServer,
  service: Service,
  send: Send,
  run: Run,
  pause: () => Promise<void>,
): Promise<void> {
  const ref = { kind: 'jointInferenceService' as const, namespace: ns, name: service.name };
  const sample = helmetDetectionSample();
  const spec = sample['spec'] as { edgeWorker: Record<string, unknown> };
  spec.edgeWorker['nodeName'] = service.node;
  let object = await api.kube.create('jointInferenceService', ns, {
    ...sample,
    metadata: { name: service.name, namespace: ns },
    spec,
  });
  const sent = async (kind: EventKind, operation: string) => {
    await send(kind, object);
    const state = `${operation} ${object.metadata.uid}:${object.metadata.generation}`;
    run.expected.get(service.node)!.add(`${ns}/${service.name} ${state}`);
    run.last.get(service.node)!.set(`${ns}/${service.name}`, state);
  };
  await sent('add', 'insert');
  for (let g = 2; g <= generations; g += 1) {
    await pause();
    const parameters = [{ key: 'nms_threshold', value: String(g / 10) }];
    object = await api.kube.patch(ref, { spec: { edgeWorker: { workerSpec: { parameters } } } });
    await sent('update', 'update');
  }
  if (!service.deleted) return;
  await pause();
  await api.kube.delete(ref);
  await sent('delete', 'delete');
}

/** The replicas' calls to local controllers (none of this test's nodes names one). */
const http = createHttpClient();

/** Two downstream-sync replicas as the function runs them, each with its own client. */
async function startReplicas(
  connect: (name: string) => Promise<RedisClient>,
  api: TestApiServer,
  logs: Array<Array<Record<string, unknown>>>,
): Promise<Listening[]> {
  const replicas: Listening[] = [];
  for (let i = 0; i < 2; i += 1) {
    const client = await connect(`downstream-sync replica ${i}`);
    const downstream = createDownstream({
      kube: api.kube,
      redis: client,
      streams: createTaskStreams(client, { maxLength: 1000 }),
      localControllers: createLocalControllerClient({ timeoutMs: 2000, send: http.send }),
    });
    const telemetry = capturedTelemetry('downstream-sync');
    logs.push(telemetry.lines);
    const server = buildServer(downstreamSyncDefinition({ downstream, readiness: [] }), {
      telemetry,
      bodyLimitBytes: 1 << 20,
      readinessTimeoutMs: 1000,
    });
    replicas.push(await listen(server));
  }
  return replicas;
}

/**
 * For each edge node: versions it was sent but never got, versions it got in more than one
 * stream entry, and its `current` entries (what an edge starting from nothing reloads) that are
 * not the service's last version.
 */
function tally(edges: readonly EdgeNode[], run: Run, currents: ReadonlyMap<string, Versions>) {
  const missing: string[] = [];
  const twice: string[] = [];
  const stale: string[] = [];
  for (const edge of edges) {
    for (const version of run.expected.get(edge.node)!) {
      if (!edge.entries.has(version)) missing.push(`${edge.node}: ${version}`);
    }
    for (const [version, ids] of edge.entries) {
      if (ids.size > 1) twice.push(`${edge.node}: ${version} in ${[...ids].join(', ')}`);
    }
    const wanted = [...run.last.get(edge.node)!]
      .filter(([, state]) => !state.startsWith('delete'))
      .map(([service, state]) => [service, state.split(' ')[1]]);
    const current = currents.get(edge.node);
    if (JSON.stringify(current) !== JSON.stringify(Object.fromEntries(wanted.sort()))) {
      stale.push(`${edge.node}: ${JSON.stringify(current)}`);
    }
  }
  return { missing, twice, stale };
}

/** Each node's `current` hash as service -> "<uid>:<generation>", services sorted. */
async function currentsOf(client: RedisClient, run: Run): Promise<Map<string, Versions>> {
  const currents = new Map<string, Versions>();
  for (const node of nodes) {
    const hash = await retrying<Versions>(
      () => client.hgetall(nodeKeys(node).current),
      run.counter,
    );
    const entries = Object.entries(hash).map(([service, text]) => {
      const task = JSON.parse(text) as { uid: string; generation: number };
      return [service, `${task.uid}:${task.generation}`] as const;
    });
    currents.set(node, Object.fromEntries(entries.sort()));
  }
  return currents;
}

/**
 * Sends every service's events, all services at once, to the two replicas in turn; SIGKILLs the
 * master once a quarter are answered. Resolves when all are answered (the failover may go on).
 */
async function sendAll(
  api: TestApiServer,
  replicas: readonly Listening[],
  logs: ReadonlyArray<ReadonlyArray<Record<string, unknown>>>,
  run: Run,
  redis: FailoverRedis,
): Promise<{ failover: Promise<void> }> {
  const rng = seededRandom(20261124);
  let answered = 0;
  let failover: Promise<void> = Promise.resolve();
  const send: Send = async (kind, object) => {
    const id = `${object.metadata.name}-${kind}-${object.metadata.generation}`;
    const replica = replicas[answered % 2]!;
    const status = await retrying(async () => {
      run.alive();
      // The same CloudEvent each time, as Knative redelivers it.
      const answer = await postEvent(
        replica.url,
        `dev.knative.apiserver.resource.${kind}`,
        object,
        { 'ce-id': id },
      );
      await answer.text();
      return answer.status === 503 ? 'unavailable' : answer.status;
    }, run.counter);
    const errors = logs.flat().filter((l) => l['status'] === 500);
    expect([200, 202], `${id}: ${JSON.stringify(errors.slice(0, 3))}`).toContain(status);
    answered += 1;
    if (answered === Math.floor(operations / 4)) {
      failover = redis.failover(nodeKeys(hotNode).stream);
    }
  };
  // Events of one service follow one another a few milliseconds apart, as edits do.
  const pause = () => new Promise<void>((r) => setTimeout(r, rng() * 40));
  try {
    await Promise.all(services.map((s) => serviceLife(api, s, send, run, pause)));
  } catch (err) {
    // The test has failed; a failover under way finishes first, so the topology stops whole.
    await failover.catch(() => undefined);
    throw err;
  }
  return { failover };
}

describe.each<Topology>(['sentinel', 'cluster'])('downstream-sync, %s failover', (topology) => {
  let redis: FailoverRedis;
  let api: TestApiServer;
  let replicas: Listening[] = [];
  const edgeClients: RedisClient[] = [];
  const connect = (name: string) => redis.client(1, name);
  const logs: Array<Array<Record<string, unknown>>> = [];

  beforeAll(async () => {
    redis = await startFailoverRedis(topology);
    api = await startApiServer();
    for (const node of nodes)
      await api.kube.create('node', undefined, { metadata: { name: node } });
    replicas = await startReplicas(connect, api, logs);
    // Every edge node is its own process with its own connection (its reads block).
    for (const node of nodes) edgeClients.push(await connect(`edge ${node}`));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    http.close();
    await api?.close();
    await redis?.stop();
  });

  it('delivers every version of every task to its node once across the failover', async () => {
    const run: Run = {
      counter: { unavailable: 0 },
      alive: () => redis.alive(),
      expected: new Map(nodes.map((n) => [n, new Set<string>()])),
      last: new Map(nodes.map((n) => [n, new Map<string, string>()])),
      sentAt: undefined,
    };
    const edges: EdgeNode[] = nodes.map((node) => ({
      node,
      entries: new Map(),
      held: new Map(),
      redelivered: 0,
      trimmed: 0,
    }));
    const consumers = await Promise.all(
      nodes.map((node, i) =>
        retrying(
          () => createTaskConsumer(edgeClients[i]!, { node, consumer: `${node}-edge` }),
          run.counter,
        ),
      ),
    );
    const edgesDone = Promise.all(edges.map((edge, i) => runEdge(edge, consumers[i]!, run)));
    // Awaited below; handled now so that a failure while the senders still run is not unhandled.
    edgesDone.catch(() => undefined);
    const { failover } = await sendAll(api, replicas, logs, run, redis).catch(async (err) => {
      run.sentAt = 0; // the test has failed: the edges stop at their next turn
      await edgesDone.catch(() => undefined);
      throw err;
    });
    run.sentAt = Date.now();
    await failover;
    await edgesDone;

    const { missing, twice, stale } = tally(edges, run, await currentsOf(edgeClients[0]!, run));
    report({
      scenario: 'downstream-sync: tasks to 20 nodes',
      topology,
      operations,
      failovers: redis.failovers,
      // Versions a node never got, and `current` entries not at the service's last version.
      lost: missing.length + stale.length,
      doubled: twice.length,
      unavailable: run.counter.unavailable,
    });
    expect(redis.failovers).toBe(1);
    expect(edges.reduce((n, e) => n + e.trimmed, 0)).toBe(0);
    expect(missing).toEqual([]);
    const redelivered = edges.reduce((n, e) => n + e.redelivered, 0);
    // An entry read again after its acknowledgement was lost is the group's at least once.
    expect(twice, `besides ${redelivered} entries read again`).toEqual([]);
    expect(stale).toEqual([]);
    for (const edge of edges) {
      const held = new Map([...edge.held].map(([service, h]) => [service, h.version]));
      expect(held, edge.node).toEqual(run.last.get(edge.node));
    }
  }, 180_000);
});
