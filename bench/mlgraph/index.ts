/**
 * bench/mlgraph: what running models as an ML graph costs over calling them. The project's two
 * digit classifiers (models/edge.onnx "small", models/cloud.onnx "large") are served by
 * cloud-infer, each in its own process from the bundle; two graph executors (the router function
 * with MLGRAPH_GRAPH, from the bundle) run (1) an ensemble — a static built-in router over both
 * members, their answers joined by a joiner process through Redis — and (2) a Thompson built-in
 * router over two children that are both the large member. The same batch-1 OIP JSON request
 * goes, over the same number of keep-alive connections, to a bare functions-framework hello (the
 * ceiling), each member directly, and each graph: alternating phases, several rounds, medians.
 * Targets: ensemble requests/s >= 0.8x its slowest member's; the router graph's p50 <= 1.5 ms
 * over the large member's. A second condition with one connection shows latency unloaded.
 */
import { availableParallelism } from 'node:os';
import { loadMnist, pixels } from '../../shared/training/data.js';
import { finish } from '../support/report.js';
import type { Target } from '../support/report.js';
import { checkAnswers } from './check.js';
import { phase } from './load.js';
import type { Phase, Request } from './load.js';
import { ensemblePlan, routeName, routerPlan } from './plans.js';
import { Fleet } from './processes.js';
import { cpuFigures, names, printCondition, printCpu, printNotes, summarize } from './tables.js';
import type { Condition, Name } from './tables.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 5);
const seconds = Number(process.env['BENCH_SECONDS'] ?? 4);
const connections = Number(process.env['BENCH_CONNECTIONS'] ?? 4);
const warmupSeconds = 2;
for (const [name, value] of Object.entries({ rounds, seconds, connections })) {
  // autocannon reads a duration of 0 as "no limit": refuse it rather than run for ever.
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number >= 1`);
}

type Urls = Record<Name, string>;

/** One held-out digit as a batch-1 OIP JSON request, as a client of the graph sends it. */
function digitRequest(): Request {
  const { test } = loadMnist();
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [
        {
          name: 'input',
          shape: [1, pixels],
          datatype: 'FP32',
          data: Array.from(test.x.subarray(0, pixels)),
        },
      ],
    }),
  };
}

/** Every process of the run; the pids by label, for the CPU tables. */
async function startAll(fleet: Fleet) {
  const redis = await fleet.startRedis();
  const [hello, small, large] = await Promise.all([
    fleet.startHello(),
    fleet.startMember('edge', 'edge.onnx'),
    fleet.startMember('cloud', 'cloud.onnx'),
  ]);
  const joiner = await fleet.startFunction('joiner', {
    FUNCTION_TARGET: 'joiner',
    MLGRAPH_NODE: 'both',
    // Far beyond any phase's latency: no join is ever handed out partial.
    MLGRAPH_JOIN_DEADLINE_MS: '30000',
    REDIS_URL: redis.url,
  });
  const members = {
    small: { base: small.base, model: 'edge' },
    large: { base: large.base, model: 'cloud' },
  };
  const graphs = { ensemble: ensemblePlan(members, joiner.base), router: routerPlan(members) };
  const executor = (plan: typeof graphs.ensemble) =>
    fleet.startFunction(`executor ${plan.graph}`, {
      FUNCTION_TARGET: 'router',
      MLGRAPH_GRAPH: JSON.stringify(plan),
      REDIS_URL: redis.url,
    });
  const [ensemble, routerGraph] = await Promise.all([
    executor(graphs.ensemble),
    executor(graphs.router),
  ]);
  const urls: Urls = {
    hello: `${hello.base}/`,
    small: `${small.base}/v2/models/edge/infer`,
    large: `${large.base}/v2/models/cloud/infer`,
    ensemble: `${ensemble.base}/v2/models/${routeName(graphs.ensemble)}/infer`,
    'router-graph': `${routerGraph.base}/v2/models/${routeName(graphs.router)}/infer`,
  };
  const pids = new Map([
    ['hello', hello.pid],
    ['small', small.pid],
    ['large', large.pid],
    ['ensemble executor', ensemble.pid],
    ['router executor', routerGraph.pid],
    ['joiner', joiner.pid],
    ['redis', redis.pid],
  ]);
  return { urls, pids };
}

/**
 * A warm-up phase per target (V8 optimizes for a while; Redis and the pools fill), then the
 * rounds: every target once per round, the order reversed every other round so that drift and
 * what the previous phase left behind (garbage, Redis keys) fall on all targets alike.
 */
async function measure(
  urls: Urls,
  request: Request,
  conns: number,
  pids: ReadonlyMap<string, number>,
): Promise<Record<Name, Phase[]>> {
  const run = (name: Name, duration: number) =>
    phase({ name, url: urls[name] }, request, { connections: conns, seconds: duration, pids });
  for (const name of names) await run(name, warmupSeconds);
  const phases = Object.fromEntries(names.map((n) => [n, [] as Phase[]])) as Record<Name, Phase[]>;
  for (let round = 0; round < rounds; round += 1) {
    const order = round % 2 === 0 ? [...names] : [...names].reverse();
    for (const name of order) phases[name].push(await run(name, seconds));
  }
  return phases;
}

/** The figures of one condition, suffixed (`_c1` for the one-connection condition). */
function figuresOf(c: Condition, suffix: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const name of names) {
    const key = name.replace('-', '_');
    out[`${key}_rps${suffix}`] = Math.round(c.summary[name].rps);
    if (name === 'hello') continue;
    out[`${key}_p50_ms${suffix}`] = round3(c.summary[name].p50);
    out[`${key}_p99_ms${suffix}`] = round3(c.summary[name].p99);
  }
  out[`mlgraph_ensemble_vs_slowest_member${suffix}`] = round3(c.ensembleVsSlowest);
  out[`mlgraph_overhead_p50_ms${suffix}`] = round3(c.overheadP50);
  return out;
}

const round3 = (n: number) => Number(n.toFixed(3));

function targetsOf(c: Condition): Record<string, Target> {
  return {
    mlgraph_ensemble_vs_slowest_member: {
      value: round3(c.ensembleVsSlowest),
      op: '>=',
      target: 0.8,
    },
    mlgraph_overhead_p50_ms: { value: round3(c.overheadP50), op: '<=', target: 1.5 },
  };
}

export async function main(): Promise<void> {
  process.stdout.write(
    `bench/mlgraph: batch-1 MNIST digits as OIP JSON; ${rounds} rounds of ${seconds} s per ` +
      `target (after a ${warmupSeconds} s warm-up each), ${connections} keep-alive connections, ` +
      `then the same with 1\n`,
  );
  const fleet = new Fleet();
  const request = digitRequest();
  const conditions: Condition[] = [];
  try {
    const { urls, pids } = await startAll(fleet);
    const checked = await checkAnswers(
      {
        small: urls.small,
        large: urls.large,
        ensemble: urls.ensemble,
        routerGraph: urls['router-graph'],
      },
      request,
    );
    process.stdout.write(
      `checked: the ensemble answers both members' outputs (mlgraph-nodes ${checked.ensembleNodes}); ` +
        `the router graph answers the large member's output from one child (a ${checked.routed['a']}, ` +
        `b ${checked.routed['b']} of 24)\n`,
    );
    for (const conns of [connections, 1]) {
      const phases = await measure(urls, request, conns, pids);
      conditions.push({ connections: conns, ...summarize(phases, seconds) });
    }
  } finally {
    await fleet.stopAll();
  }
  for (const c of conditions) printCondition(c);
  printCpu(conditions[0]!);
  printNotes(conditions, availableParallelism());
  const [loaded, single] = conditions as [Condition, Condition];
  finish(
    'mlgraph',
    { ...figuresOf(loaded, ''), ...figuresOf(single, '_c1'), ...cpuFigures(loaded) },
    targetsOf(loaded),
  );
}
