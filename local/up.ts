/**
 * `npm run local`: the embedded stack kept running as a place to work, as `kn quickstart` gives a
 * Knative user a cluster. It prints what a person needs (the KUBECONFIG to export, the Broker, the
 * models, where each process logs) and then each Knative Service's local URL as it becomes ready,
 * until Ctrl-C stops everything it started. With a snapshot directory, the API server's objects
 * and Redis's data survive a restart.
 */
import { spawnSync } from 'node:child_process';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { buildCanvases, canvasSize } from '../shared/training/detection-data.js';
import { loadMnist } from '../shared/training/data.js';
import { Store, servedTypes } from './apiserver/index.js';
import { writeFederatedStarter } from './federated-files.js';
import { startLocalStack } from './stack.js';
import type { LocalStack, LocalStackOptions } from './stack.js';
import type { LogSource, ServingSupervisor } from './serving/index.js';

interface UpOptions extends Pick<
  LocalStackOptions,
  'root' | 'bundle' | 'redisUrl' | 'apiPort' | 'brokerPort' | 'signal'
> {
  /** Keep the API server's state and Redis's data here across restarts. */
  snapshot?: string;
  /** Services whose log lines are also printed (`all`: every process). */
  follow?: readonly string[];
  say: (line: string) => void;
}

const snapshotEveryMs = 2_000;

/** Where state, kubeconfig and logs go: the snapshot directory, or a fresh temporary one. */
function stateDirectory(snapshot: string | undefined): string {
  if (snapshot === undefined) return mkdtempSync(join(tmpdir(), 'edgeai-local-'));
  mkdirSync(snapshot, { recursive: true, mode: 0o700 });
  return snapshot;
}

/** The API server's objects from the snapshot, if there is one. */
function loadStore(dir: string, keep: boolean): Store {
  const store = new Store();
  const file = join(dir, 'apiserver.json');
  if (keep && existsSync(file)) {
    store.load(JSON.parse(readFileSync(file, 'utf8')) as ReturnType<Store['dump']>, servedTypes);
  }
  return store;
}

/** Written aside and renamed: a crash mid-write never leaves half a snapshot. */
function saveStore(store: Store, dir: string): void {
  const file = join(dir, 'apiserver.json');
  writeFileSync(`${file}.part`, JSON.stringify(store.dump()), { mode: 0o600 });
  renameSync(`${file}.part`, file);
}

/** One file per process under `dir`, named by namespace and revision, with the pino lines. */
function logWriter(dir: string, follow: readonly string[], say: (line: string) => void) {
  mkdirSync(dir, { recursive: true });
  const wanted = (source: LogSource) =>
    follow.includes('all') ||
    follow.includes(source.name) ||
    follow.includes(`${source.namespace}/${source.name}`);
  return (source: LogSource, line: string) => {
    appendFileSync(join(dir, `${source.namespace}.${source.revision}.log`), `${line}\n`);
    if (wanted(source)) say(`[${source.namespace}/${source.name}] ${line}`);
  };
}

/**
 * Models for the repository's trained detectors under the names the seed's sample asks for, and
 * one held-out canvas as an OIP request, so the sample runs as written and curl has something to
 * send.
 */
function writeStarterFiles(root: URL, dir: string): { models: string; request: string } {
  const models = join(dir, 'models.yaml');
  const docs = [
    ['small-model', 'detector-edge.onnx'],
    ['big-model', 'detector-cloud.onnx'],
  ].map(([name, file]) => ({
    apiVersion: 'edgeai.io/v1alpha1',
    kind: 'Model',
    metadata: { name, namespace: 'default' },
    spec: { url: new URL(`models/${file}`, root).href, format: 'onnx' },
  }));
  writeFileSync(models, docs.map((d) => stringify(d)).join('---\n'));
  const request = join(dir, 'canvas.json');
  const canvas = buildCanvases(loadMnist().test, 1, 4242);
  writeFileSync(
    request,
    JSON.stringify({
      inputs: [
        {
          name: 'image',
          datatype: 'FP32',
          shape: [1, 1, canvasSize, canvasSize],
          data: Array.from(canvas.images, (v) => Math.round(v * 1000) / 1000),
        },
      ],
      outputs: [{ name: 'detections' }, { name: 'num_detections' }, { name: 'tier' }],
    }),
  );
  return { models, request };
}

/**
 * Prints a line when a Service's route becomes ready (or moves to another revision) and when its
 * processes go: what `kubectl get ksvc -w` shows on a cluster, plus the local URL and pids.
 */
function watchServices(serving: ServingSupervisor, say: (line: string) => void): () => void {
  const shown = new Map<string, string>();
  const pids = new Set<number>();
  const tick = () => {
    const now = new Map<string, string>();
    for (const p of serving.processes()) {
      if (p.pid !== undefined && !pids.has(p.pid)) {
        pids.add(p.pid);
        say(`process  ${p.namespace}/${p.revision} pid ${p.pid}`);
      }
      const url = serving.urlOf(p.namespace, p.name);
      if (url !== undefined) now.set(`${p.namespace}/${p.name}`, url);
    }
    for (const [service, url] of now) {
      if (shown.get(service) !== url) say(`ready    ${service} ${url}`);
    }
    for (const service of shown.keys()) if (!now.has(service)) say(`gone     ${service}`);
    shown.clear();
    for (const [service, url] of now) shown.set(service, url);
  };
  tick();
  const timer = setInterval(tick, 500);
  return () => clearInterval(timer);
}

function kubectlHint(): string | undefined {
  const found = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
  return found.error === undefined
    ? undefined
    : 'kubectl is not on PATH: install it (apt-get install -y kubernetes-client, or see kubernetes.io/docs/tasks/tools) to use the stack with kubectl';
}

/** Starts the stack, says how to use it, and runs until `signal` aborts; resolves once stopped. */
async function runLocal(options: UpOptions): Promise<void> {
  const { say } = options;
  const keep = options.snapshot !== undefined;
  const dir = stateDirectory(options.snapshot);
  const logs = join(dir, 'logs');
  const store = loadStore(dir, keep);
  const hint = kubectlHint();
  if (hint !== undefined) say(`warning  ${hint}`);
  const stack: LocalStack = await startLocalStack({
    ...options,
    store,
    stateDir: dir,
    keepState: keep,
    // What a cluster's log collector gets: the functions' info lines (make demo shows warnings).
    env: { LOG_LEVEL: 'info' },
    say: (line) => say(line),
    onLog: logWriter(logs, options.follow ?? [], say),
    onBrokerEvent: (_record, line) => appendFileSync(join(logs, 'broker.log'), `${line}\n`),
    onError: (err) =>
      appendFileSync(
        join(logs, 'stack.log'),
        `${err instanceof Error ? err.message : String(err)}\n`,
      ),
  });
  const saver = keep ? setInterval(() => saveStore(store, dir), snapshotEveryMs) : undefined;
  try {
    const starter = writeStarterFiles(options.root, dir);
    const federated = writeFederatedStarter(options.root, dir);
    const root = fileURLToPath(options.root);
    say('');
    say(
      `edgeai local stack is up (pid ${process.pid}); Ctrl-C stops it and every process it started.`,
    );
    say(`  export KUBECONFIG=${stack.kubeconfigFile}`);
    say(`  api server  ${stack.apiUrl}`);
    say(`  broker      ${stack.brokerUrl}`);
    say(
      `  redis       ${stack.redisUrl}${stack.redisPid === undefined ? '' : ` (pid ${stack.redisPid})`}`,
    );
    say(`  logs        ${logs} (one file per process; --logs <service> prints one here)`);
    say(`  snapshot    ${keep ? dir : 'none (--snapshot <dir> keeps state across restarts)'}`);
    say(
      `  models      ${readdirSync(join(root, 'models')).filter((f) => f.endsWith('.onnx')).length} ONNX models under file://${join(root, 'models')}/`,
    );
    say(
      '  nodes       edge0, edge1, edge2, solar-corona-cloud (with node tokens); namespace default',
    );
    say('Try the seed sample:');
    say(`  kubectl apply -f ${starter.models}`);
    say('  kubectl apply -f knative/samples/helmet-detection-demo.yaml');
    say('  kubectl get jis -w');
    say(
      `  curl -s <the edge URL below>/v2/models/small-model/infer -H 'content-type: application/json' -d @${starter.request}`,
    );
    say(
      `Try federated learning (knative/samples/federated-digits.yaml, its Datasets under ${federated.dir}/):`,
    );
    say(`  kubectl apply -f ${federated.manifest}`);
    say('  kubectl get fl -w');
    say('');
    const stopWatching = watchServices(stack.serving, say);
    await new Promise<void>((resolve) => {
      if (options.signal?.aborted === true) resolve();
      options.signal?.addEventListener('abort', () => resolve(), { once: true });
    });
    stopWatching();
  } finally {
    if (saver !== undefined) clearInterval(saver);
    await stack.close();
    if (keep) saveStore(store, dir);
    else rmSync(join(dir, 'kubeconfig'), { force: true });
  }
  say(keep ? `stopped; state kept in ${dir}` : `stopped; logs kept in ${logs}`);
}

export { runLocal };
export type { UpOptions };
