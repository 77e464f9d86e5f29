/**
 * The ML graph part of `make demo`: knative/samples/mlgraph-digits.yaml applied unchanged (a
 * Thompson router over the edge and cloud digit classifiers, their branches joined), held-out
 * MNIST digits sent through the graph's URL, a reward for each (1 when the answer is right),
 * and the router's share per child before and after. Rewarded for accuracy alone, the router
 * learns to offload nearly everything (a right answer from the cloud is worth as much as one
 * from the edge); so the same digits then go through the same graph with a cost on the cloud
 * arm (the MLGraph's `router.costs`, lambda per offloaded request: the router maximises
 * accuracy minus lambda times offload), applied as a second MLGraph, and the two are printed
 * side by side. Then the graph is deleted and its Services seen gone. The
 * two models are cloud-infer Services of the project's classifiers.
 */
import type { Kube, KubeObject } from '../shared/k8s/index.js';
import { loadMnist } from '../shared/training/data.js';
import { readManifest, readiness, ready, waitFor } from './stack.js';
import type { LocalStack } from './stack.js';

const ns = 'default';
const graphName = 'digits';
const sampleFile = 'knative/samples/mlgraph-digits.yaml';

interface Step {
  stack: LocalStack;
  step: (line: string) => void;
  wait: { signal?: AbortSignal };
}

interface GraphFigures {
  requests: number;
  /** Share of the requests the router sent to the cloud model, first and last window. */
  cloudShare: { first: number; last: number };
  /** The router Service's /arms at the end. */
  arms: Array<{ name: string; routed: number; rewarded: number; meanReward: number | null }>;
  /** The same digits with the cloud arm costing `lambda` per request. */
  costed: { lambda: number; cloudShare: { first: number; last: number } };
  /** Over all the requests, without and with the cost: accuracy, offload, accuracy - lambda offload. */
  outcome: Record<'blind' | 'costed', { accuracy: number; offload: number; net: number }>;
}

/** What an offloaded request costs in the costed run, in the reward's units (a right answer is 1). */
const lambda = 0.1;

/** A cloud-infer Knative Service serving one of the digit classifiers. */
function modelService(root: URL, name: string, model: string, file: string): KubeObject {
  return {
    apiVersion: 'serving.knative.dev/v1',
    kind: 'Service',
    metadata: { name, namespace: ns },
    spec: {
      template: {
        spec: {
          containers: [
            {
              image: 'edgeai',
              env: [
                { name: 'FUNCTION_TARGET', value: 'cloud-infer' },
                { name: 'MODEL_NAME', value: model },
                { name: 'MODEL_URL', value: new URL(`models/${file}`, root).href },
              ],
            },
          ],
        },
      },
    },
  };
}

const serviceRef = (name: string) => ({ kind: 'knativeService' as const, namespace: ns, name });
const graphRef = { kind: 'mlGraph' as const, namespace: ns, name: graphName };

/** Waits for a Service or an MLGraph of the demo to be Ready. */
async function whenReady(
  kube: Kube,
  ref: ReturnType<typeof serviceRef> | typeof graphRef,
  wait: Step['wait'],
): Promise<void> {
  await waitFor(
    `${ref.name} to become Ready`,
    async () => (ready(await kube.get(ref).catch(() => undefined)) ? true : undefined),
    { timeoutMs: 120_000, why: async () => readiness(await kube.get(ref)), ...wait },
  );
}

/** The two model Services, then the sample graph; resolves with the graph's URL. */
async function deployGraph({ stack, step, wait }: Step, root: URL): Promise<string> {
  for (const [name, model, file] of [
    ['digits-edge', 'edge', 'edge.onnx'],
    ['digits-cloud', 'cloud', 'cloud.onnx'],
  ] as const) {
    await stack.kube.create('knativeService', ns, modelService(root, name, model, file));
  }
  await Promise.all(
    ['digits-edge', 'digits-cloud'].map((n) => whenReady(stack.kube, serviceRef(n), wait)),
  );
  step(
    `graph          models ready: digits-edge (models/edge.onnx), digits-cloud (models/cloud.onnx)`,
  );
  await stack.kube.create('mlGraph', ns, readManifest(new URL(sampleFile, root), sampleFile));
  step(`graph          applied MLGraph ${ns}/${graphName} (${sampleFile}, unchanged)`);
  await whenReady(stack.kube, graphRef, wait);
  const status = (await stack.kube.get(graphRef))['status'] as { url?: string; nodeCount?: number };
  const services = await stack.kube.list('knativeService', { namespace: ns });
  const owned = services.items
    .filter((s) => s.metadata.labels?.['edgeai.io/mlgraph'] === graphName)
    .map((s) => s.metadata.name);
  step(
    `graph          Ready: ${status.nodeCount ?? 0} nodes, url ${status.url ?? '?'}; Services ${owned.join(', ')}`,
  );
  return waitFor('the graph route', () => stack.urlOf(ns, graphName), wait);
}

const argmax = (values: readonly number[]) => values.indexOf(Math.max(...values));

/** One digit through the graph: which child answered, whether right, and the prediction id. */
async function predict(url: string, model: string, pixels: number[], label: number) {
  const answer = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 784], data: pixels }],
    }),
  });
  if (answer.status !== 200)
    throw new Error(`graph answered ${answer.status}: ${await answer.text()}`);
  const puid = answer.headers.get('mlgraph-puid')!;
  // The `any` join's answer: the one child's OIP answer under its name.
  const joined = (await answer.json()) as {
    inputs: Record<string, { outputs: Array<{ data: number[] }> }>;
  };
  const [child, oip] = Object.entries(joined.inputs)[0]!;
  return { child, right: argmax(oip.outputs[0]!.data) === label, puid };
}

async function reward(url: string, puid: string, right: boolean): Promise<void> {
  const rewarded = await fetch(`${url}/reward`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ puid, reward: right ? 1 : 0 }),
  });
  if (rewarded.status !== 200) throw new Error(`reward answered ${rewarded.status}`);
}

/**
 * One window of digits. The first window's rewards are sent after it (the router's share
 * before it has learnt anything); later ones as each answer comes.
 */
async function window(url: string, model: string, from: number, size: number, later: boolean) {
  const { test } = loadMnist();
  const owed: Array<{ puid: string; right: boolean }> = [];
  let cloud = 0;
  let right = 0;
  for (let i = from; i < from + size; i += 1) {
    const outcome = await predict(
      url,
      model,
      Array.from(test.x.subarray(i * 784, (i + 1) * 784)),
      test.y[i]!,
    );
    if (outcome.child === 'cloud') cloud += 1;
    if (outcome.right) right += 1;
    if (later) owed.push(outcome);
    else await reward(url, outcome.puid, outcome.right);
  }
  for (const o of owed) await reward(url, o.puid, o.right);
  return { cloud, right };
}

/** Sends `n` held-out digits in windows, printing the router's share per window. */
async function sendWindows(
  step: Step['step'],
  target: { url: string; model: string; label: string },
  n: number,
  windows: number,
) {
  const size = Math.floor(n / windows);
  const perWindow: Array<{ cloud: number; right: number }> = [];
  for (let w = 0; w < windows; w += 1) {
    const { cloud, right } = await window(target.url, target.model, w * size, size, w === 0);
    perWindow.push({ cloud, right });
    const when = w === 0 ? 'before any reward' : 'rewarded as they go';
    step(
      `graph ${target.label.padEnd(8)} requests ${w * size + 1}-${(w + 1) * size} (${when}): router sent ${cloud} to cloud, ${size - cloud} to edge (${((100 * cloud) / size).toFixed(0)}% cloud); right ${right}`,
    );
  }
  const total = size * windows;
  const offload = perWindow.reduce((a, x) => a + x.cloud, 0) / total;
  const accuracy = perWindow.reduce((a, x) => a + x.right, 0) / total;
  const share = (x: { cloud: number }) => x.cloud / size;
  return {
    requests: total,
    cloudShare: { first: share(perWindow[0]!), last: share(perWindow.at(-1)!) },
    outcome: { accuracy, offload, net: accuracy - lambda * offload },
  };
}

/** The sample graph's digits, rewarded for accuracy alone; then its router's /arms. */
async function learn({ stack, step }: Step, url: string, n: number, windows: number) {
  const sent = await sendWindows(step, { url, model: graphName, label: '' }, n, windows);
  const pick = await waitFor('the router Service', () => stack.urlOf(ns, `${graphName}-pick`), {});
  const arms = ((await (await fetch(`${pick}/arms`)).json()) as { children: GraphFigures['arms'] })
    .children;
  for (const arm of arms) {
    step(
      `graph          arm ${arm.name.padEnd(6)} routed ${arm.routed}, rewarded ${arm.rewarded}, mean reward ${arm.meanReward?.toFixed(3) ?? '-'} (GET ${graphName}-pick /arms)`,
    );
  }
  return { ...sent, arms };
}

/**
 * The sample graph with its router's cloud arm costing `lambda` (the MLGraph's `router.costs`),
 * as a second MLGraph of its own: its executor and router Services are its own, so its router
 * learns from nothing, on its own Redis state.
 */
function costedGraph(root: URL, name: string): KubeObject {
  const sample = readManifest(new URL(sampleFile, root), sampleFile);
  const spec = sample['spec'] as { nodes: Array<{ name: string; router?: object }> };
  const nodes = spec.nodes.map((node) =>
    node.name === 'pick'
      ? { ...node, router: { ...node.router, costs: { cloud: { perRequest: lambda } } } }
      : node,
  );
  return { ...sample, metadata: { name, namespace: ns }, spec: { ...spec, nodes } };
}

/** The same digits through the costed graph; the graph deleted after, its Services with it. */
async function learnWithCost(at: Step, root: URL, n: number, windows: number) {
  const { stack, step, wait } = at;
  const name = `${graphName}-costed`;
  const ref = { ...graphRef, name };
  await stack.kube.create('mlGraph', ns, costedGraph(root, name));
  await whenReady(stack.kube, ref, wait);
  const url = await waitFor(`the ${name} route`, () => stack.urlOf(ns, name), wait);
  step(
    `graph          MLGraph ${name}: the same spec, its router's cloud arm costing ${lambda} a request (router.costs): the router maximises accuracy - ${lambda} x offload`,
  );
  const sent = await sendWindows(step, { url, model: name, label: 'costed' }, n, windows);
  await deleteGraph(stack.kube, name, wait);
  return sent;
}

/** Deletes MLGraph `name` and waits until none of its Services is left. */
async function deleteGraph(kube: Kube, name: string, wait: Step['wait']): Promise<void> {
  await kube.delete({ ...graphRef, name });
  await waitFor(
    `the ${name} Services to be deleted with it`,
    async () => {
      const left = await kube.list('knativeService', { namespace: ns });
      return left.items.some((s) => s.metadata.labels?.['edgeai.io/mlgraph'] === name)
        ? undefined
        : true;
    },
    wait,
  );
}

/** Deletes the graph, waits for its Services to go, then removes the two model Services. */
async function removeGraph({ stack, step, wait }: Step): Promise<void> {
  await deleteGraph(stack.kube, graphName, wait);
  step(
    `graph          deleted MLGraph ${graphName}: its executor and router Services went with it`,
  );
  for (const name of ['digits-edge', 'digits-cloud']) await stack.kube.delete(serviceRef(name));
}

async function graphDemo(at: Step, root: URL, n: number): Promise<GraphFigures> {
  const url = await deployGraph(at, root);
  const blind = await learn(at, url, n, 5);
  const costed = await learnWithCost(at, root, n, 5);
  const line = (label: string, o: GraphFigures['outcome']['blind']) =>
    `graph          ${label}: accuracy ${(100 * o.accuracy).toFixed(1)}%, offloaded ${(100 * o.offload).toFixed(1)}%, accuracy - ${lambda} x offload ${o.net.toFixed(3)}`;
  at.step(line('cost-blind router (reward = right answer)', blind.outcome));
  at.step(line(`cloud arm costing ${lambda}`.padEnd(41), costed.outcome));
  await removeGraph(at);
  return {
    requests: blind.requests,
    cloudShare: blind.cloudShare,
    arms: blind.arms,
    costed: { lambda, cloudShare: costed.cloudShare },
    outcome: { blind: blind.outcome, costed: costed.outcome },
  };
}

export { graphDemo };
export type { GraphFigures };
