/**
 * The development serving supervisor against a real development API server, with a tiny node
 * HTTP server as every Service's "container": it serves /health/readiness (200, or 503 while
 * the file READY_FILE names does not exist), echoes its pid, argv and environment on /env, and
 * on /echo answers 201 with the request's method, URL and x-test header in headers and its body
 * streamed back.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotFoundError } from '../../../shared/errors/index.js';
import { createKubeWatch, loadKubeConfig } from '../../../shared/k8s/index.js';
import type { KubeObject, KubeWatch } from '../../../shared/k8s/index.js';
import { createServingSupervisor } from '../../../local/serving/index.js';
import type {
  LogSource,
  ServingSupervisor,
  ServingSupervisorOptions,
} from '../../../local/serving/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';

const container = `
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
if (process.env.CRASH === 'now') {
  console.error('boom: CRASH=now');
  process.exit(3);
}
const gate = process.env.READY_FILE;
createServer((req, res) => {
  if (req.url === '/health/readiness') {
    res.writeHead(gate === undefined || existsSync(gate) ? 200 : 503).end();
  } else if (req.url === '/env') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ pid: process.pid, argv: process.argv.slice(2), env: process.env }));
  } else if (req.url.startsWith('/echo')) {
    res.writeHead(201, {
      'x-method': req.method,
      'x-url': req.url,
      'x-test': req.headers['x-test'] ?? '',
      'x-revision': process.env.K_REVISION,
    });
    req.pipe(res);
  } else {
    res.writeHead(404).end();
  }
}).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening'));
process.on('SIGTERM', () => {
  console.log('got SIGTERM');
  process.exit(0);
});
`;

const namespace = 'serving-test';
const timeout = 60_000;

interface Echo {
  pid: number;
  argv: string[];
  env: Record<string, string>;
}

interface Status {
  observedGeneration?: number;
  url?: string;
  address?: { url?: string };
  latestReadyRevisionName?: string;
  latestCreatedRevisionName?: string;
  traffic?: unknown[];
  conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
}

/** Polls until `check` gives a value (not undefined or false); generous for a loaded machine. */
async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  ms = 40_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function echo(url: string): Promise<Echo | undefined> {
  try {
    const answer = await fetch(`${url}/env`, { signal: AbortSignal.timeout(5000) });
    return answer.ok ? ((await answer.json()) as Echo) : undefined;
  } catch {
    return undefined;
  }
}

/** The status and body of a GET, or undefined when nothing answers at the URL. */
async function get(url: string): Promise<{ status: number; text: string } | undefined> {
  try {
    const answer = await fetch(url, { signal: AbortSignal.timeout(5000) });
    return { status: answer.status, text: await answer.text() };
  } catch {
    return undefined;
  }
}

/** Whether a new connection to the URL's port is refused (nothing listens there). */
function refused(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

function service(
  name: string,
  spec: { env?: unknown[]; envFrom?: unknown[]; nodeSelector?: Record<string, string> },
  labels: Record<string, string> = {},
): KubeObject {
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Service',
    metadata: { name, namespace, labels },
    spec: {
      template: {
        spec: {
          ...(spec.nodeSelector === undefined ? {} : { nodeSelector: spec.nodeSelector }),
          containers: [
            {
              image: 'ignored.example/image:tag',
              ports: [{ containerPort: 8080 }],
              env: spec.env ?? [],
              ...(spec.envFrom === undefined ? {} : { envFrom: spec.envFrom }),
              readinessProbe: { httpGet: { path: '/health/readiness' } },
            },
          ],
        },
      },
    },
  };
}

function secret(name: string, data: Record<string, string>): KubeObject {
  return {
    metadata: { name, namespace },
    data: Object.fromEntries(
      Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    ),
  };
}

describe('development serving supervisor', () => {
  let api: TestApiServer;
  let supervisor: ServingSupervisor;
  let dir: string;
  let script: string;
  const logs: Array<[LogSource, string]> = [];
  const errors: Error[] = [];

  const options = (): ServingSupervisorOptions => ({
    kubeConfig: loadKubeConfig({ KUBECONFIG: api.kubeconfigFile }),
    kube: api.kube,
    bundle: script,
    cwd: dir,
    env: { LOG_LEVEL: 'warn', MODEL_ROOT: '/models' },
    configMaps: { 'edgeai-redis': { url: 'redis://from-configmap:6379' } },
    defaultNode: 'dev-host',
    onLog: (source, line) => logs.push([source, line]),
    onError: (err) => errors.push(err),
    restartBackoff: { initialMs: 100, maxMs: 1000 },
    terminationGraceMs: 5000,
  });

  const status = async (name: string): Promise<Status> => {
    const object = await api.kube.get({ kind: 'knativeService', namespace, name });
    return object['status'] ?? {};
  };
  const condition = (s: Status, type = 'Ready') => s.conditions?.find((c) => c.type === type);

  /** The status once the given generation is Ready True. */
  const readyAt = (name: string, generation = 1) =>
    waitFor(`${name} ready at generation ${generation}`, async () => {
      const s = await status(name);
      return s.observedGeneration === generation && condition(s)?.status === 'True' && s;
    });

  beforeAll(async () => {
    api = await startApiServer();
    dir = mkdtempSync(join(tmpdir(), 'edgeai-serving-'));
    script = join(dir, 'container.mjs');
    writeFileSync(script, container);
    supervisor = createServingSupervisor(options());
    await supervisor.start();
  });

  afterAll(async () => {
    // Closed first: a failed assertion must not leave the processes running.
    await supervisor?.close();
    await api?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    // The supervisor's own trouble (watch, status writes) would show here.
    expect(errors.map((e) => e.message)).toEqual([]);
  });

  it(
    'runs a process per Service with the resolved env and reports Ready with a URL that answers',
    async () => {
      await api.kube.create('secret', namespace, secret('creds', { password: 's3cret' }));
      await api.kube.create('secret', namespace, secret('bulk', { BULK_A: 'a', BULK_B: 'b' }));
      await api.kube.create(
        'knativeService',
        namespace,
        service('echo', {
          nodeSelector: { 'kubernetes.io/hostname': 'edge-7' },
          envFrom: [
            { secretRef: { name: 'bulk' } },
            { secretRef: { name: 'missing-bulk', optional: true } },
          ],
          env: [
            { name: 'FUNCTION_TARGET', value: 'edge-infer' },
            { name: 'LOG_LEVEL', value: 'info' },
            {
              name: 'REDIS_PASSWORD',
              valueFrom: { secretKeyRef: { name: 'creds', key: 'password' } },
            },
            {
              name: 'MAYBE',
              valueFrom: { secretKeyRef: { name: 'nothing', key: 'x', optional: true } },
            },
            {
              name: 'REDIS_URL',
              valueFrom: { configMapKeyRef: { name: 'edgeai-redis', key: 'url' } },
            },
            { name: 'EDGEAI_NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
            { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
        }),
      );
      const s = await readyAt('echo');
      expect(s).toMatchObject({
        latestCreatedRevisionName: 'echo-00001',
        latestReadyRevisionName: 'echo-00001',
        traffic: [{ revisionName: 'echo-00001', latestRevision: true, percent: 100 }],
      });
      // The Service's route: its own port, not the process's.
      expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(s.address?.url).toBe(s.url);
      expect(supervisor.routeUrl(namespace, 'echo')).toBe(s.url);
      const processPort = supervisor.processes().find((p) => p.name === 'echo')?.port;
      expect(processPort).toBeDefined();
      expect(new URL(s.url!).port).not.toBe(String(processPort));
      expect(s.conditions?.map((c) => [c.type, c.status])).toEqual([
        ['ConfigurationsReady', 'True'],
        ['Ready', 'True'],
        ['RoutesReady', 'True'],
      ]);
      expect(supervisor.urlOf(namespace, 'echo')).toBe(s.url);
      expect(supervisor.urlOf(namespace, 'no-such-service')).toBeUndefined();

      const answer = await waitFor('echo answers', () => echo(s.url!));
      expect(answer.argv).toEqual([]); // `node <bundle>`, nothing more
      expect(answer.env).toMatchObject({
        FUNCTION_TARGET: 'edge-infer',
        LOG_LEVEL: 'warn', // the supervisor's env option is applied last
        MODEL_ROOT: '/models',
        REDIS_PASSWORD: 's3cret',
        REDIS_URL: 'redis://from-configmap:6379',
        EDGEAI_NODE: 'edge-7',
        POD_NAMESPACE: namespace,
        POD_NAME: 'echo-00001-deployment',
        BULK_A: 'a',
        BULK_B: 'b',
        PORT: String(processPort),
        K_SERVICE: 'echo',
        K_CONFIGURATION: 'echo',
        K_REVISION: 'echo-00001',
      });
      expect(answer.env['MAYBE']).toBeUndefined();
      // A container gets its own environment, not the supervisor's.
      expect(answer.env['VITEST']).toBeUndefined();
      expect(
        logs.some(([src, line]) => src.revision === 'echo-00001' && line === 'listening'),
      ).toBe(true);
    },
    timeout,
  );

  it(
    'restarts a killed process on the same URL, with Ready False while it is down',
    async () => {
      const seen: Array<{ status: string; reason?: string; message?: string }> = [];
      const stop = api.store.watch(api.store.revision, (event) => {
        const s = event.object['status'] as Status | undefined;
        const ready = s === undefined ? undefined : condition(s);
        if (event.object.metadata.name === 'crashy' && ready !== undefined) seen.push(ready);
      });
      try {
        await api.kube.create(
          'knativeService',
          namespace,
          service('crashy', {
            env: [{ name: 'EDGEAI_NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }],
          }),
        );
        const s = await readyAt('crashy');
        const first = await waitFor('crashy answers', () => echo(s.url!));
        expect(first.env['EDGEAI_NODE']).toBe('dev-host'); // no hostname selector: defaultNode
        process.kill(first.pid, 'SIGKILL');
        const second = await waitFor('a new crashy process on the same URL', async () => {
          const now = await echo(s.url!);
          return now !== undefined && now.pid !== first.pid && now;
        });
        expect(alive(first.pid)).toBe(false);
        await readyAt('crashy');
        expect(supervisor.urlOf(namespace, 'crashy')).toBe(s.url);
        expect(second.env['K_REVISION']).toBe('crashy-00001');
        const down = seen.find((c) => c.status === 'False');
        expect(down?.reason).toBe('RevisionFailed');
        expect(down?.message).toMatch(
          /^Revision "crashy-00001" failed with message: Container failed: the process was killed by SIGKILL/,
        );
        expect(supervisor.processes().find((p) => p.name === 'crashy')).toMatchObject({
          phase: 'ready',
          routed: true,
          pid: second.pid,
          restarts: 1,
        });
      } finally {
        stop();
      }
    },
    timeout,
  );

  it(
    'backs off a process that keeps exiting, and a fixed spec rolls out',
    async () => {
      const body = service('crashloop', { env: [{ name: 'CRASH', value: 'now' }] });
      await api.kube.create('knativeService', namespace, body);
      const failing = await waitFor('crashloop restarted twice and Ready False', async () => {
        const s = await status('crashloop');
        const entry = supervisor.processes().find((p) => p.name === 'crashloop');
        return (entry?.restarts ?? 0) >= 2 && condition(s)?.status === 'False' && s;
      });
      expect(condition(failing)).toMatchObject({ reason: 'RevisionFailed' });
      expect(condition(failing)?.message).toMatch(
        /failed with message: Container failed: the process exited with code 3: boom: CRASH=now \(restarting in/,
      );
      expect(condition(failing, 'RoutesReady')).toMatchObject({
        status: 'False',
        reason: 'RevisionMissing',
      });
      expect(failing.url).toBeUndefined();
      expect(supervisor.urlOf(namespace, 'crashloop')).toBeUndefined();

      await api.kube.patch(
        { kind: 'knativeService', namespace, name: 'crashloop' },
        { spec: service('crashloop', { env: [{ name: 'CRASH', value: 'no' }] })['spec'] },
      );
      const fixed = await readyAt('crashloop', 2);
      expect(fixed.latestReadyRevisionName).toBe('crashloop-00002');
      expect(supervisor.processes().filter((p) => p.name === 'crashloop')).toHaveLength(1);
    },
    timeout,
  );

  it(
    'rolls a spec change to a new process once it is ready, then stops the old one',
    async () => {
      const gate = join(dir, `ready-${randomUUID()}`);
      await api.kube.create(
        'knativeService',
        namespace,
        service('roll', { env: [{ name: 'VERSION', value: '1' }] }),
      );
      const v1 = await readyAt('roll');
      const old = await waitFor('roll v1 answers', () => echo(v1.url!));
      expect(old.env['VERSION']).toBe('1');

      await api.kube.patch(
        { kind: 'knativeService', namespace, name: 'roll' },
        {
          spec: service('roll', {
            env: [
              { name: 'VERSION', value: '2' },
              { name: 'READY_FILE', value: gate },
            ],
          })['spec'],
        },
      );
      // The new revision runs but is not ready: traffic stays on the old one.
      const rolling = await waitFor('roll-00002 started', async () => {
        const s = await status('roll');
        const next = supervisor.processes().find((p) => p.revision === 'roll-00002');
        return s.observedGeneration === 2 && next?.pid !== undefined && s;
      });
      expect(condition(rolling)).toMatchObject({ status: 'Unknown', reason: 'RevisionMissing' });
      expect(rolling).toMatchObject({
        latestCreatedRevisionName: 'roll-00002',
        latestReadyRevisionName: 'roll-00001',
        url: v1.url,
      });
      expect(supervisor.urlOf(namespace, 'roll')).toBe(v1.url);
      expect((await echo(v1.url!))?.env['VERSION']).toBe('1');

      writeFileSync(gate, '');
      const v2 = await readyAt('roll', 2);
      expect(v2.latestReadyRevisionName).toBe('roll-00002');
      // The route is the same; requests through it reach the new revision.
      expect(v2.url).toBe(v1.url);
      expect(supervisor.urlOf(namespace, 'roll')).toBe(v1.url);
      const now = await waitFor('roll answers', () => echo(v1.url!));
      expect(now.env['VERSION']).toBe('2');
      expect(now.env['K_REVISION']).toBe('roll-00002');
      await waitFor('the old process gone', () => !alive(old.pid));
      expect(
        logs.some(([src, line]) => src.revision === 'roll-00001' && line === 'got SIGTERM'),
      ).toBe(true);
      expect(supervisor.processes().filter((p) => p.name === 'roll')).toMatchObject([
        { revision: 'roll-00002', routed: true, phase: 'ready' },
      ]);
    },
    timeout,
  );

  it(
    "gives a Service another Service's cluster URLs as that Service's route, 503 until it is ready",
    async () => {
      // Asking for the URL allocates the route: it answers before the Service exists.
      const route = supervisor.routeUrl(namespace, 'callee');
      expect(route).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(supervisor.routeUrl(namespace, 'callee')).toBe(route);
      expect(supervisor.urlOf(namespace, 'callee')).toBeUndefined();
      const absent = await waitFor('the route answers', () => get(`${route}/env`));
      expect(absent.status).toBe(503);
      expect(absent.text).toContain(`Knative Service ${namespace}/callee does not exist`);

      await api.kube.create(
        'knativeService',
        namespace,
        service('caller', {
          env: [
            { name: 'CLOUD_URL', value: `http://callee.${namespace}.svc.cluster.local` },
            { name: 'WITH_PATH', value: `http://callee.${namespace}.svc:8080/v1/infer?x=1` },
            { name: 'SHORT', value: `http://callee.${namespace}/p` },
            { name: 'EXTERNAL', value: 'http://example.com/x' },
            { name: 'TLS', value: `https://callee.${namespace}.svc.cluster.local` },
          ],
        }),
      );
      const caller = await readyAt('caller');
      const { env } = await waitFor('caller answers', () => echo(caller.url!));
      expect(env).toMatchObject({
        CLOUD_URL: route,
        WITH_PATH: `${route}/v1/infer?x=1`,
        SHORT: `${route}/p`,
        EXTERNAL: 'http://example.com/x',
        TLS: `https://callee.${namespace}.svc.cluster.local`,
      });

      // The callee starts after its caller, and is not ready at first.
      const gate = join(dir, `ready-${randomUUID()}`);
      await api.kube.create(
        'knativeService',
        namespace,
        service('callee', { env: [{ name: 'READY_FILE', value: gate }] }),
      );
      await waitFor('the callee process started', () =>
        supervisor.processes().some((p) => p.name === 'callee' && p.pid !== undefined),
      );
      const starting = await get(`${env['CLOUD_URL']}/env`);
      expect(starting?.status).toBe(503);
      expect(starting?.text).toContain(`Knative Service ${namespace}/callee has no ready revision`);
      expect(supervisor.urlOf(namespace, 'callee')).toBeUndefined();

      writeFileSync(gate, '');
      const ready = await readyAt('callee');
      expect(ready.url).toBe(route);
      expect(ready.address?.url).toBe(route);
      expect(supervisor.urlOf(namespace, 'callee')).toBe(route);

      // Method, path, query, headers and body go through, and the answer comes back.
      const body = Buffer.alloc(1 << 20, 'edge');
      const answer = await fetch(`${env['CLOUD_URL']}/echo?q=1`, {
        method: 'POST',
        headers: { 'x-test': 'through the route', 'content-type': 'application/octet-stream' },
        body,
        signal: AbortSignal.timeout(20_000),
      });
      expect(answer.status).toBe(201);
      expect(answer.headers.get('x-method')).toBe('POST');
      expect(answer.headers.get('x-url')).toBe('/echo?q=1');
      expect(answer.headers.get('x-test')).toBe('through the route');
      expect(answer.headers.get('x-revision')).toBe('callee-00001');
      expect(Buffer.from(await answer.arrayBuffer()).equals(body)).toBe(true);
    },
    timeout,
  );

  it(
    'stops the process of a deleted Service, writes nothing more, and runs one created again',
    async () => {
      await api.kube.create('knativeService', namespace, service('gone', {}));
      const s = await readyAt('gone');
      const { pid } = await waitFor('gone answers', () => echo(s.url!));
      await api.kube.delete({ kind: 'knativeService', namespace, name: 'gone' });
      await waitFor('the process gone', () => !alive(pid));
      await waitFor('the route closed', () => refused(s.url!));
      expect(supervisor.urlOf(namespace, 'gone')).toBeUndefined();
      expect(supervisor.processes().filter((p) => p.name === 'gone')).toEqual([]);
      // Not re-created; a late status write to it would be refused (NotFound) and reach
      // onError, which afterAll checks is empty once the supervisor has closed.
      await expect(
        api.kube.get({ kind: 'knativeService', namespace, name: 'gone' }),
      ).rejects.toBeInstanceOf(NotFoundError);

      // The same name again is a new Service: a new process, from generation 1, on the same route.
      await api.kube.create('knativeService', namespace, service('gone', {}));
      const again = await readyAt('gone');
      expect(again.url).toBe(s.url);
      const answer = await waitFor('gone answers again', () => echo(again.url!));
      expect(answer.pid).not.toBe(pid);
      expect(answer.env['K_REVISION']).toBe('gone-00001');
    },
    timeout,
  );

  it(
    'reports a missing required Secret (or key) as Ready False, and starts once it exists',
    async () => {
      await api.kube.create(
        'knativeService',
        namespace,
        service('needs-secret', {
          env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'late', key: 'token' } } }],
        }),
      );
      const missing = await waitFor('needs-secret Ready False', async () => {
        const s = await status('needs-secret');
        return condition(s)?.status === 'False' && s;
      });
      expect(condition(missing)).toMatchObject({ reason: 'RevisionFailed' });
      expect(condition(missing)?.message).toMatch(
        /^Revision "needs-secret-00001" failed with message: secret "late" not found \(restarting in/,
      );
      expect(condition(missing, 'ConfigurationsReady')?.status).toBe('False');
      expect(supervisor.processes().find((p) => p.name === 'needs-secret')?.pid).toBeUndefined();
      expect(supervisor.urlOf(namespace, 'needs-secret')).toBeUndefined();

      await api.kube.create('secret', namespace, secret('late', { other: 'x' }));
      await waitFor('the missing key named', async () =>
        condition(await status('needs-secret'))?.message?.includes(
          `couldn't find key token in Secret ${namespace}/late`,
        ),
      );
      await api.kube.patch(
        { kind: 'secret', namespace, name: 'late' },
        { data: { token: Buffer.from('t0k3n').toString('base64') } },
      );
      const s = await readyAt('needs-secret');
      expect((await waitFor('needs-secret answers', () => echo(s.url!))).env['TOKEN']).toBe(
        't0k3n',
      );
    },
    timeout,
  );
});

describe('development serving supervisor, start and close', () => {
  it(
    'runs the Services that exist before it starts, with a custom command, and stops them on close',
    async () => {
      const api = await startApiServer();
      const dir = mkdtempSync(join(tmpdir(), 'edgeai-serving-'));
      const script = join(dir, 'container.mjs');
      writeFileSync(script, container);
      try {
        await api.kube.create(
          'knativeService',
          namespace,
          service('early', { env: [{ name: 'A', value: '1' }] }, { custom: 'yes' }),
        );
        const supervisor = createServingSupervisor({
          kubeConfig: loadKubeConfig({ KUBECONFIG: api.kubeconfigFile }),
          bundle: join(dir, 'not-used.mjs'),
          command: (ksvc) => ({
            command: process.execPath,
            args: [
              script,
              `--service=${ksvc.metadata.name}`,
              ksvc.metadata.labels?.['custom'] ?? '',
            ],
          }),
          onError: () => {},
          terminationGraceMs: 5000,
        });
        await supervisor.start();
        let pid: number;
        let url: string;
        try {
          url = await waitFor('early ready', () => supervisor.urlOf(namespace, 'early'));
          const answer = await waitFor('early answers', () => echo(url));
          expect(answer.argv).toEqual(['--service=early', 'yes']);
          pid = answer.pid;
        } finally {
          await supervisor.close();
        }
        expect(alive(pid)).toBe(false);
        expect(supervisor.processes()).toEqual([]);
        expect(await refused(url)).toBe(true); // the route is closed too
      } finally {
        await api.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    timeout,
  );

  it(
    'fails start when the API server cannot be reached',
    async () => {
      const api = await startApiServer();
      const kubeConfig = loadKubeConfig({ KUBECONFIG: api.kubeconfigFile });
      await api.close();
      const supervisor = createServingSupervisor({ kubeConfig, bundle: 'unused.mjs' });
      await expect(supervisor.start()).rejects.toThrow(/API server unreachable/);
      await supervisor.close();
    },
    timeout,
  );

  it(
    'finds what changed while no watch was open when its watch ends (the informer relists)',
    async () => {
      const api = await startApiServer();
      const dir = mkdtempSync(join(tmpdir(), 'edgeai-serving-'));
      const script = join(dir, 'container.mjs');
      writeFileSync(script, container);
      const kubeConfig = loadKubeConfig({ KUBECONFIG: api.kubeconfigFile });
      const inner = createKubeWatch(kubeConfig);
      let opened = 0;
      let end: (() => void) | undefined;
      // The first watch swallows every change, as if the connection had dropped unnoticed.
      const watch: KubeWatch = {
        async watch(kind, options, onChange, done) {
          opened += 1;
          const open = await inner.watch(kind, options, opened === 1 ? () => {} : onChange, done);
          end = () => {
            open.stop();
            done(undefined);
          };
          return open;
        },
      };
      const errors: Error[] = [];
      const supervisor = createServingSupervisor({
        kubeConfig,
        kube: api.kube,
        watch,
        bundle: script,
        onError: (err) => errors.push(err),
        terminationGraceMs: 5000,
      });
      try {
        await api.kube.create('knativeService', namespace, service('kept', {}));
        await api.kube.create('knativeService', namespace, service('dropped', {}));
        await supervisor.start();
        const dropped = await waitFor('dropped ready', () =>
          supervisor.urlOf(namespace, 'dropped'),
        );
        const { pid } = await waitFor('dropped answers', () => echo(dropped));
        await waitFor('the first watch', () => end !== undefined);

        await api.kube.delete({ kind: 'knativeService', namespace, name: 'dropped' });
        await api.kube.create('knativeService', namespace, service('added', {}));
        end!();
        const added = await waitFor('added ready', () => supervisor.urlOf(namespace, 'added'));
        expect((await waitFor('added answers', () => echo(added))).env['K_SERVICE']).toBe('added');
        await waitFor('the dropped process gone', () => !alive(pid));
        await waitFor('the dropped route closed', () => refused(dropped));
        expect(supervisor.urlOf(namespace, 'kept')).toBeDefined();
        expect(opened).toBeGreaterThanOrEqual(2);
        expect(errors).toEqual([]);
      } finally {
        await supervisor.close();
        await api.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    timeout,
  );
});
