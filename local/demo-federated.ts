/**
 * The federated part of `make demo`: knative/samples/federated-digits.yaml with its Datasets
 * written on this machine (three edge nodes, a few hundred digits each) and a round policy that
 * closes rounds within seconds (a quorum of 2 of the 3 trainers, 15 s deadline, 3 rounds). A
 * JointInferenceService serves the job's Model from the start; mid-round one trainer is killed
 * (SIGKILL to the process the supervisor runs it as, which restarts it) and the round closes on
 * its quorum anyway. Then each round's participants, stragglers, loss and accuracy, `kubectl get
 * fl`, the trainers deleted with the end of the job (cleanPolicy All), the Model moved to the
 * aggregator's model (its sha256 that of the bytes served), the JointInferenceService rolled out
 * to it, and one prediction answered by the federated model.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubeObject } from '../shared/k8s/index.js';
import { loadMnist } from '../shared/training/data.js';
import { federatedSample, sampleFile, writeFederatedData } from './federated-files.js';
import { readiness, ready, waitFor } from './stack.js';
import type { LocalStack } from './stack.js';

const ns = 'default';
const job = 'digits';
const model = 'digits-fl';
const jis = 'digits-joint';
const aggregator = `${job}-aggregator`;

interface Step {
  stack: LocalStack;
  step: (line: string) => void;
  wait: { signal?: AbortSignal };
}

interface RoundLine {
  round: number;
  participants: number;
  stragglers: string[];
  closedBy: string;
  durationMs: number;
  loss?: number;
  accuracy?: number;
}

interface FederatedFigures {
  trainers: Array<{ service: string; dataset: string; node: string }>;
  /** The trainer killed (its Service, Dataset and process) and the round it was killed in. */
  killed: { service: string; dataset: string; pid: number; round: number };
  rounds: RoundLine[];
  phase: string;
  /** The Model as the job left it, and the sha256 of the bytes its url serves. */
  model: { url: string; sha256: string; served: string };
  /** The JointInferenceService's edge worker before and after the rollout. */
  modelUrl: { before: string; after: string };
  prediction: { label: number; predicted: number; tier: string };
}

interface JobStatus {
  phase?: string;
  round?: number;
  accuracy?: number;
  activeWorkers?: number;
  history?: RoundLine[];
  conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
}

const jobRef = { kind: 'federatedLearningJob' as const, namespace: ns, name: job };
const modelRef = { kind: 'model' as const, namespace: ns, name: model };
const serviceRef = (name: string) => ({ kind: 'knativeService' as const, namespace: ns, name });
const statusOf = (o: KubeObject | undefined) => (o?.['status'] ?? {}) as JobStatus;
const pad = (s: string) => s.padEnd(15);

/** The sample's objects, the job's round policy and stop condition set for the demo. */
function demoSample(root: URL, dir: string): KubeObject[] {
  return federatedSample(root, dir).map((object) => {
    if (object.kind !== 'FederatedLearningJob') return object;
    const spec = object['spec'] as Record<string, unknown>;
    return {
      ...object,
      spec: {
        ...spec,
        roundPolicy: { minParticipants: 2, roundTimeoutSeconds: 15 },
        stopCondition: { maxRounds: 3 },
      },
    };
  });
}

/** A Service's first container's env value. */
function envOf(service: KubeObject | undefined, name: string): string | undefined {
  const containers = (
    service?.['spec'] as
      | {
          template: {
            spec: { containers: Array<{ env?: Array<{ name: string; value?: string }> }> };
          };
        }
      | undefined
  )?.template.spec.containers;
  return containers?.[0]?.env?.find((v) => v.name === name)?.value;
}

async function whenReady(at: Step, name: string): Promise<KubeObject> {
  const { kube } = at.stack;
  return waitFor(
    `${name} to become Ready`,
    async () => {
      const service = await kube.get(serviceRef(name)).catch(() => undefined);
      return ready(service) ? service : undefined;
    },
    {
      timeoutMs: 120_000,
      why: async () => readiness(await kube.get(serviceRef(name))),
      ...at.wait,
    },
  );
}

/** The data files, the sample's Datasets and Model, and the cloud model for inference. */
async function prepare(at: Step, root: URL): Promise<KubeObject[]> {
  const data = writeFederatedData(join(at.stack.stateDir, 'fl'), {
    perClient: 300,
    evaluation: 500,
  });
  const objects = demoSample(root, data.dir);
  for (const object of objects.filter((o) => o.kind === 'Dataset' || o.kind === 'Model')) {
    await at.stack.kube.create(object.kind === 'Model' ? 'model' : 'dataset', ns, object);
  }
  await at.stack.kube.create('model', ns, {
    metadata: { name: 'digits-cloud', namespace: ns },
    spec: { url: new URL('models/cloud.onnx', root).href, format: 'onnx' },
  });
  at.step(
    `${pad('fl')}Datasets digits-edge0/1/2 on nodes edge0/1/2 (${data.clients.map((c) => c.samples).join(', ')} digits), digits-eval (${data.evaluation.samples}), under ${data.dir}/`,
  );
  return objects;
}

/** A JointInferenceService whose edge worker serves the job's Model (the cloud's: cloud.onnx). */
async function deployJoint(at: Step): Promise<string> {
  await at.stack.kube.create('jointInferenceService', ns, {
    metadata: { name: jis, namespace: ns },
    spec: {
      edgeWorker: {
        model: { name: model },
        nodeName: 'edge0',
        hardExampleAlgorithm: { name: 'Threshold', parameters: { threshold: 0.9 } },
      },
      cloudWorker: { model: { name: 'digits-cloud' }, nodeName: 'solar-corona-cloud' },
    },
  });
  const edge = await whenReady(at, `${jis}-edge`);
  const url = envOf(edge, 'MODEL_URL') ?? '?';
  at.step(`${pad('fl')}JointInferenceService ${jis} on Model ${model}: edge MODEL_URL ${url}`);
  return url;
}

/**
 * The job's trainers (Service, Dataset, node) once its aggregator and its three trainers are
 * Ready.
 */
async function jobWorkers(at: Step): Promise<FederatedFigures['trainers']> {
  const trainers = await waitFor(
    "the job's trainers",
    async () => {
      const listed = await at.stack.kube.list('knativeService', {
        namespace: ns,
        labelSelector: `edgeai.io/federatedlearningjob=${job}`,
      });
      const found = listed.items.filter((s) => s.metadata.name !== aggregator);
      return found.length === 3 ? found : undefined;
    },
    { timeoutMs: 60_000, ...at.wait },
  );
  await Promise.all(
    [aggregator, ...trainers.map((t) => t.metadata.name)].map((n) => whenReady(at, n)),
  );
  return trainers.map((t) => ({
    service: t.metadata.name,
    dataset: t.metadata.labels?.['edgeai.io/fl-worker'] ?? '?',
    node:
      (t['spec'] as { template: { spec: { nodeSelector?: Record<string, string> } } }).template.spec
        .nodeSelector?.['kubernetes.io/hostname'] ?? '?',
  }));
}

/** Applies the job and waits until its aggregator and trainers are up. */
async function deployJob(at: Step, objects: readonly KubeObject[]) {
  const body = objects.find((o) => o.kind === 'FederatedLearningJob')!;
  await at.stack.kube.create('federatedLearningJob', ns, body);
  at.step(
    `${pad('fl')}applied FederatedLearningJob ${ns}/${job} (${sampleFile}, roundPolicy minParticipants 2 of 3, roundTimeoutSeconds 15; stopCondition maxRounds 3)`,
  );
  const plans = await jobWorkers(at);
  at.step(
    `${pad('fl')}aggregator ${aggregator} ready; trainers ${plans.map((p) => `${p.service} on ${p.node}`).join(', ')}`,
  );
  return plans;
}

interface RoundView {
  round: number;
  status: string;
  selected: string[];
  submitted: string[];
}

type Trainer = FederatedFigures['trainers'][number];

/** The job's trainer Services whose Dataset is in `datasets` and whose process runs, with it. */
async function runningTrainers(at: Step, datasets: readonly string[]) {
  const listed = await at.stack.kube.list('knativeService', {
    namespace: ns,
    labelSelector: `edgeai.io/federatedlearningjob=${job}`,
  });
  const processes = at.stack.serving.processes();
  return listed.items.flatMap((s) => {
    const dataset = s.metadata.labels?.['edgeai.io/fl-worker'];
    const pid = processes.find(
      (p) => p.namespace === ns && p.name === s.metadata.name && p.pid !== undefined,
    )?.pid;
    return dataset !== undefined && datasets.includes(dataset) && pid !== undefined
      ? [{ service: s.metadata.name, dataset, pid }]
      : [];
  });
}

/**
 * The aggregator's view of round 2 (or a later one) while it is open, and a trainer whose update
 * is not in yet and whose process runs (one starting or restarting has none to kill). Asked
 * every 10 ms from the moment the aggregator has a route: a round of this job lasts about a
 * tenth of a second, the whole job well under one.
 */
async function pendingInRound2(at: Step) {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline && at.wait.signal?.aborted !== true) {
    const url = at.stack.urlOf(ns, aggregator);
    const answer =
      url === undefined ? undefined : await fetch(`${url}/v1/round`).catch(() => undefined);
    const view = answer?.status === 200 ? ((await answer.json()) as RoundView) : undefined;
    if (view !== undefined && view.status === 'done') break;
    if (view !== undefined && view.round >= 2 && view.status === 'open') {
      const pending = view.selected.filter((d) => !view.submitted.includes(d));
      const victim = (await runningTrainers(at, pending)).at(-1);
      if (victim !== undefined) return { view, victim };
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('no open round 2 or later seen with a running trainer still training');
}

/**
 * Waits for round 2 to open and SIGKILLs the process of a trainer whose update is not in yet:
 * its Service's process, as a node losing power would. The supervisor restarts it. Called as
 * the job is applied (`trainers` resolves once its workers are Ready), so that a fast job's
 * rounds do not all go by before the watch starts.
 */
async function killMidRound(at: Step, trainers: Promise<readonly Trainer[]>) {
  const { view, victim } = await pendingInRound2(at);
  process.kill(victim.pid, 'SIGKILL');
  const node = (await trainers).find((t) => t.service === victim.service)?.node ?? '?';
  at.step(
    `${pad('fl')}round ${view.round} open, updates in from ${view.submitted.length === 0 ? 'none yet' : view.submitted.join(', ')}: killed ${victim.service} (pid ${victim.pid}, ${victim.dataset} on ${node}) with SIGKILL`,
  );
  return { ...victim, round: view.round };
}

/** Waits for the job to end, printing each new round as reconcile-tick writes it. */
async function rounds(at: Step): Promise<JobStatus> {
  let shown = 0;
  return waitFor(
    `FederatedLearningJob ${job} to succeed`,
    async () => {
      const status = statusOf(await at.stack.kube.get(jobRef));
      for (const line of (status.history ?? []).filter((h) => h.round > shown)) {
        at.step(
          `${pad('fl')}round ${line.round} closed by ${line.closedBy}: ${line.participants} updates${line.stragglers.length === 0 ? '' : `, stragglers ${line.stragglers.join(', ')}`}`,
        );
        shown = line.round;
      }
      if (status.phase === 'Failed')
        throw new Error(
          `the job failed: ${status.conditions?.find((c) => c.type === 'Failed')?.message ?? ''}`,
        );
      return status.phase === 'Succeeded' ? status : undefined;
    },
    {
      timeoutMs: 180_000,
      why: async () => JSON.stringify(statusOf(await at.stack.kube.get(jobRef)).conditions),
      ...at.wait,
    },
  );
}

/** The rounds as a table, one line each. */
function roundTable(at: Step, history: readonly RoundLine[]): void {
  const cells = (row: readonly string[]) =>
    `${pad('fl')}${row[0]!.padStart(5)}  ${row[1]!.padEnd(12)}  ${row[2]!.padEnd(14)}  ${row[3]!.padEnd(9)}  ${row[4]!.padStart(9)}  ${row[5]!.padStart(8)}  ${row[6]!.padStart(6)}`;
  at.step(
    cells(['round', 'participants', 'stragglers', 'closed by', 'eval loss', 'accuracy', 'time']),
  );
  for (const h of history) {
    at.step(
      cells([
        String(h.round),
        String(h.participants),
        h.stragglers.length === 0 ? '-' : h.stragglers.join(','),
        h.closedBy,
        h.loss === undefined ? '-' : h.loss.toFixed(4),
        h.accuracy === undefined ? '-' : `${(100 * h.accuracy).toFixed(1)}%`,
        `${(h.durationMs / 1000).toFixed(1)} s`,
      ]),
    );
  }
}

/**
 * `kubectl get fl` against the stack; without kubectl on PATH, the same columns (the CRD's
 * printer columns) from the API.
 */
async function getFl(at: Step): Promise<void> {
  at.step(`${pad('fl')}kubectl get fl`);
  // Not spawnSync: the API server kubectl talks to runs in this process.
  const run = await promisify(execFile)('kubectl', ['get', 'fl', '-n', ns], {
    env: { ...process.env, KUBECONFIG: at.stack.kubeconfigFile },
    encoding: 'utf8',
    timeout: 30_000,
  }).catch(() => undefined);
  if (run !== undefined) {
    for (const line of run.stdout.trimEnd().split('\n')) at.step(`${pad('')}${line}`);
    return;
  }
  const s = statusOf(await at.stack.kube.get(jobRef));
  at.step(
    `${pad('')}NAME     PHASE       ROUND   ACCURACY   WORKERS   (kubectl not found: from the API)`,
  );
  at.step(
    `${pad('')}${job.padEnd(8)} ${(s.phase ?? '').padEnd(11)} ${String(s.round ?? 0).padEnd(7)} ${String(s.accuracy ?? '').padEnd(10)} ${s.activeWorkers ?? 0}`,
  );
}

/** Waits for the trainers to go with the end of the job (the sample's cleanPolicy, All). */
async function cleaned(at: Step): Promise<void> {
  await waitFor(
    "the job's trainers to be deleted",
    async () => {
      const listed = await at.stack.kube.list('knativeService', {
        namespace: ns,
        labelSelector: `edgeai.io/federatedlearningjob=${job}`,
      });
      return listed.items.every((s) => s.metadata.name === aggregator) ? true : undefined;
    },
    { timeoutMs: 60_000, ...at.wait },
  );
  at.step(
    `${pad('fl')}trainers deleted with the end of the job (cleanPolicy All); ${aggregator} serves its models`,
  );
}

/** The Model on the aggregator's model, and the bytes that URL serves hashed. */
async function published(at: Step) {
  const spec = await waitFor(
    `Model ${model} to be moved to the aggregator's model`,
    async () => {
      const s = (await at.stack.kube.get(modelRef))['spec'] as { url: string; sha256?: string };
      return s.url.startsWith(`http://${aggregator}.`) && s.sha256 !== undefined
        ? { url: s.url, sha256: s.sha256 }
        : undefined;
    },
    { timeoutMs: 60_000, ...at.wait },
  );
  const route = await waitFor(
    'the aggregator route',
    () => at.stack.urlOf(ns, aggregator),
    at.wait,
  );
  const bytes = new Uint8Array(
    await (await fetch(`${route}${new URL(spec.url).pathname}`)).arrayBuffer(),
  );
  const served = createHash('sha256').update(bytes).digest('hex');
  at.step(
    `${pad('fl')}Model ${model} -> ${spec.url} (sha256 ${spec.sha256.slice(0, 12)}..., ${served === spec.sha256 ? 'that of the' : 'NOT that of the'} ${bytes.length} bytes it serves)`,
  );
  return { ...spec, served };
}

/** Waits for the edge worker to run the Model's new URL. */
async function rolledOut(at: Step, url: string): Promise<string> {
  const edge = await waitFor(
    `${jis}-edge to roll out the federated model`,
    async () => {
      const service = await at.stack.kube.get(serviceRef(`${jis}-edge`));
      const observed = (service['status'] as { observedGeneration?: number } | undefined)
        ?.observedGeneration;
      return envOf(service, 'MODEL_URL') === url &&
        observed === service.metadata.generation &&
        ready(service)
        ? service
        : undefined;
    },
    { timeoutMs: 120_000, ...at.wait },
  );
  const after = envOf(edge, 'MODEL_URL') ?? '?';
  at.step(
    `${pad('fl')}${jis}-edge rolled out (generation ${edge.metadata.generation ?? 0}): MODEL_URL ${after}`,
  );
  return after;
}

/** One held-out digit to the edge worker, answered by the federated model. */
async function predict(at: Step) {
  const url = await waitFor(
    'the edge worker route',
    () => at.stack.urlOf(ns, `${jis}-edge`),
    at.wait,
  );
  const { test } = loadMnist();
  // The test split is ordered by digit: the first 7 of it.
  const i = test.y.indexOf(7);
  const answer = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [
        {
          name: 'input',
          datatype: 'FP32',
          shape: [1, 784],
          data: Array.from(test.x.subarray(i * 784, (i + 1) * 784)),
        },
      ],
    }),
  });
  if (answer.status !== 200)
    throw new Error(`${jis}-edge answered ${answer.status}: ${await answer.text()}`);
  const outputs = ((await answer.json()) as { outputs: Array<{ name: string; data: unknown[] }> })
    .outputs;
  const out = (name: string) => outputs.find((o) => o.name === name)?.data[0];
  const prediction = {
    label: test.y[i]!,
    predicted: Number(out('label')),
    tier: String(out('tier')),
  };
  at.step(
    `${pad('fl')}held-out digit ${prediction.label} -> ${jis}-edge answered ${prediction.predicted} (tier ${prediction.tier}, model ${model} from the aggregator)`,
  );
  return prediction;
}

async function federatedDemo(at: Step, root: URL): Promise<FederatedFigures> {
  const objects = await prepare(at, root);
  const before = await deployJoint(at);
  const deployed = deployJob(at, objects);
  // The rounds as the job's status shows them, while a trainer is killed.
  const [trainers, status, killed] = await Promise.all([
    deployed,
    deployed.then(() => rounds(at)),
    killMidRound(at, deployed),
  ]);
  const history = status.history ?? [];
  roundTable(at, history);
  await getFl(at);
  await cleaned(at);
  const modelFigures = await published(at);
  const after = await rolledOut(at, modelFigures.url);
  const prediction = await predict(at);
  return {
    trainers,
    killed,
    rounds: history,
    phase: status.phase ?? '',
    model: modelFigures,
    modelUrl: { before, after },
    prediction,
  };
}

export { federatedDemo, jobWorkers, killMidRound };
export type { FederatedFigures };
