/**
 * `npm run bench -- aset-calibrate [--seeds N] [--duration S] [--workers N]`: the environment's
 * calibration with static policies only (issue 20, step 2), never with an agent. Episodes start
 * empty and are counted from t = 0, as the paper plots "every moment of the simulation". For each
 * topology, lambda (20..100) and static policy on calibration seeds 1..N (training seeds, never
 * the final 201-220): success, QoS failures, rejections, and the share of QoS failures the
 * network caused (link draws over constraint (3)'s 2 (d + 2 sigma)); the offered load per access
 * point; and the checks each tied to a sentence of the paper, with the scenario hashes the
 * figures belong to.
 */
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import { scenarioFingerprint } from '../../../shared/aset/scenario.js';
import { policyNames } from '../../../shared/aset/types.js';
import type { PolicyName } from '../../../shared/aset/types.js';
import { scenarioFor, topologyNames } from '../aset-sim/jobs.js';
import type { JobResult, TopologyName } from '../aset-sim/jobs.js';
import { SimPool } from '../aset-sim/pool.js';
import { finish, printTable } from '../../../bench/support/report.js';
import type { Target } from '../../../bench/support/report.js';

const lambdas = [20, 40, 60, 80, 100] as const;
type Lambda = (typeof lambdas)[number];

interface Cell {
  success: number;
  qosFailure: number;
  rejected: number;
  /** % of QoS failures with network time over budget. */
  networkLateShare: number;
  /** Queries per second per access point, over the episode. */
  sentPerAp: number;
}

function settingsFrom(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      seeds: { type: 'string', default: '5' },
      duration: { type: 'string', default: '600' },
      workers: { type: 'string', default: String(Math.min(2, availableParallelism())) },
    },
  });
  const seeds = Number(values.seeds);
  const durationS = Number(values.duration);
  const workers = Number(values.workers);
  if (!Number.isInteger(seeds) || seeds < 1)
    throw new RangeError('--seeds must be an integer >= 1');
  if (!(durationS >= 25)) throw new RangeError('--duration must be at least one window (25 s)');
  if (!Number.isInteger(workers) || workers < 0)
    throw new RangeError('--workers must be an integer >= 0');
  return { seeds, durationS, workers };
}
type Settings = ReturnType<typeof settingsFrom>;

/** The mean over seeds of one (topology, lambda, policy). */
async function cellOf(runs: Promise<JobResult>[], accessPoints: number, durationS: number) {
  const results = await Promise.all(runs);
  const mean = (f: (r: JobResult) => number) =>
    results.reduce((sum, r) => sum + f(r), 0) / results.length;
  const all = (r: JobResult) => r.counted.success + r.counted.qosFailure + r.counted.rejected;
  const qos = results.reduce((sum, r) => sum + r.counted.qosFailure, 0);
  const late = results.reduce((sum, r) => sum + r.networkLate!, 0);
  return {
    success: mean((r) => (100 * r.counted.success) / all(r)),
    qosFailure: mean((r) => (100 * r.counted.qosFailure) / all(r)),
    rejected: mean((r) => (100 * r.counted.rejected) / all(r)),
    networkLateShare: qos > 0 ? (100 * late) / qos : 0,
    sentPerAp: mean((r) => r.sent! / durationS / accessPoints),
  } satisfies Cell;
}

type Grid = Record<TopologyName, Record<Lambda, Record<PolicyName, Cell>>>;

async function measure(settings: Settings): Promise<Grid> {
  const pool = new SimPool(settings.workers);
  const seeds = Array.from({ length: settings.seeds }, (_, i) => 1 + i);
  try {
    const grid = {} as Record<string, Record<number, Record<string, Promise<Cell>>>>;
    for (const topology of topologyNames) {
      const { topology: parsed } = await scenarioFor(topology);
      grid[topology] = {};
      // The heaviest loads first, so both threads stay busy to the end.
      for (const lambda of [...lambdas].reverse()) {
        grid[topology][lambda] = Object.fromEntries(
          policyNames.map((policy) => [
            policy,
            cellOf(
              seeds.map((seed) =>
                pool.run({
                  topology,
                  seed,
                  load: { kind: 'constant', lambda },
                  durationMs: settings.durationS * 1000,
                  warmupMs: 0,
                  runner: { kind: 'static', policy },
                }),
              ),
              parsed.schedulers.length,
              settings.durationS,
            ),
          ]),
        );
      }
    }
    const out = {} as Grid;
    for (const topology of topologyNames) {
      out[topology] = {} as Grid[TopologyName];
      for (const lambda of lambdas) {
        const cells = grid[topology]![lambda]!;
        const resolved = await Promise.all(policyNames.map((p) => cells[p]!));
        out[topology][lambda] = Object.fromEntries(
          policyNames.map((p, i) => [p, resolved[i]!]),
        ) as Record<PolicyName, Cell>;
      }
    }
    return out;
  } finally {
    await pool.close();
  }
}

const best = (cells: Record<PolicyName, Cell>): PolicyName =>
  policyNames.reduce((a, p) => (cells[p].success > cells[a].success ? p : a));

function printGrid(grid: Grid, settings: Settings): void {
  for (const topology of topologyNames) {
    printTable(
      `${topology}: success % by lambda (mean of seeds 1..${settings.seeds}, ${settings.durationS} s from empty, counted from t = 0)`,
      ['lambda', ...policyNames, 'best'],
      lambdas.map((lambda) => {
        const cells = grid[topology][lambda];
        return [lambda, ...policyNames.map((p) => cells[p].success), best(cells)];
      }),
    );
  }
  for (const lambda of [20, 60, 100] as const) {
    const cells = grid['full-edge'][lambda];
    printTable(
      `full-edge, lambda = ${lambda}: where the queries go (%), and the share of QoS failures the network caused`,
      ['policy', 'success', 'QoS failure', 'rejected', 'network-late % of QoS failures'],
      policyNames.map((p) => [
        p,
        cells[p].success,
        cells[p].qosFailure,
        cells[p].rejected,
        cells[p].networkLateShare,
      ]),
    );
  }
  printTable(
    'offered load, queries/s per access point over the episode (full-edge, farthest)',
    ['lambda', 'queries/s'],
    lambdas.map((lambda) => [lambda, grid['full-edge'][lambda].farthest.sentPerAp]),
  );
}

/** The calibration checks, each tied to a sentence of the paper (docs/aset.md). */
function checks(grid: Grid): Record<string, Target> {
  const edge = grid['full-edge'];
  const gapToBest = (lambda: Lambda) =>
    edge[lambda]['least-impedance'].success - edge[lambda][best(edge[lambda])].success;
  const late = edge[60];
  const bestAt60 = (t: TopologyName) => grid[t][60][best(grid[t][60])].success;
  return {
    // "almost 1000 queries per second per antenna" at lambda = 60 (section V-A).
    load_per_ap_lambda60_min: { value: edge[60].farthest.sentPerAp, op: '>=', target: 900 },
    load_per_ap_lambda60_max: { value: edge[60].farthest.sentPerAp, op: '<=', target: 1100 },
    // farthest "is highly affected by the unreliability of network delay for long distance
    // communications" (III-C): its network-late share clearly above closest's and LI's.
    network_late_share_farthest_minus_closer: {
      value:
        late.farthest.networkLateShare -
        Math.max(late.closest.networkLateShare, late['least-impedance'].networkLateShare),
      op: '>=',
      target: 10,
    },
    // least impedance "leads to the best performance when the overall load is low" (III-C).
    least_impedance_minus_best_lambda20: { value: gapToBest(20), op: '>=', target: -0.5 },
    // "... but may suffer from a high rejection rate once the closest and fastest model variants
    // are saturated": losing (by more than the 0.5 tie zone) at lambda >= 80.
    least_impedance_minus_best_lambda80: { value: gapToBest(80), op: '<=', target: -0.5 },
    least_impedance_minus_best_lambda100: { value: gapToBest(100), op: '<=', target: -0.5 },
    // Moving resources towards the edge raises success (figure 4): dc < co-dc < full-edge.
    co_dc_cloud_minus_dc_cloud: {
      value: bestAt60('co-dc-cloud') - bestAt60('dc-cloud'),
      op: '>=',
      target: 0.01,
    },
    full_edge_minus_co_dc_cloud: {
      value: bestAt60('full-edge') - bestAt60('co-dc-cloud'),
      op: '>=',
      target: 0.01,
    },
  };
}

async function main(args: string[]): Promise<void> {
  const settings = settingsFrom(args);
  const started = performance.now();
  const grid = await measure(settings);
  printGrid(grid, settings);
  const hashes: Array<[string, string]> = [];
  for (const topology of topologyNames) {
    hashes.push([topology, scenarioFingerprint(await scenarioFor(topology))]);
  }
  printTable(
    'scenario hashes these figures belong to (scenarioFingerprint)',
    ['topology', 'sha256'],
    hashes,
  );
  const wallS = (performance.now() - started) / 1000;
  process.stdout.write(`\n${settings.seeds} seeds, ${wallS.toFixed(0)} s\n`);
  const targets = checks(grid);
  finish(
    'aset-calibrate',
    {
      ...Object.fromEntries(Object.entries(targets).map(([k, t]) => [k, t.value])),
      wallS,
    },
    targets,
  );
}

export { main };
