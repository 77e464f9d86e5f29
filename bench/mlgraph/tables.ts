/**
 * The medians of bench/mlgraph's phases and the tables that show them: every absolute figure
 * beside the hello ceiling measured in the same run, and where the CPU goes per request.
 */
import { median, printTable } from '../support/report.js';
import type { Phase } from './load.js';

/** The targets, in the order each round visits them. */
const names = [
  'hello',
  'small',
  'large',
  'ensemble',
  'ensemble-pipelined',
  'ensemble-remote',
  'router-graph',
] as const;
type Name = (typeof names)[number];

interface Figures {
  rps: number;
  p50: number;
  p99: number;
}

interface Condition {
  connections: number;
  summary: Record<Name, Figures>;
  /** Ensemble requests/s over its slowest member's (medians). */
  ensembleVsSlowest: number;
  /** Ensemble requests/s over the pair's, 1 / (1/small + 1/large) (medians). */
  ensembleVsPair: number;
  /** The same with the join in the joiner function. */
  remoteVsPair: number;
  /** The same with the executor's calls of a turn pipelined (MLGRAPH_PIPELINE=true). */
  pipelinedVsPair: number;
  /** Router graph p50 minus the large member's p50, ms (medians). */
  overheadP50: number;
  /** Median CPU ms per request by process label, per target. */
  cpu: Record<Name, Map<string, number>>;
  /** Median cores kept busy by the run's processes during each target's phases. */
  cores: Record<Name, number>;
  /** Median cores kept busy by other processes on the machine meanwhile. */
  othersCores: Record<Name, number>;
}

function cpuPerRequest(list: readonly Phase[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const label of list[0]!.cpuMs.keys()) {
    out.set(label, median(list.map((p) => (p.cpuMs.get(label) ?? 0) / p.answered)));
  }
  return out;
}

function summarize(phases: Record<Name, Phase[]>, seconds: number): Omit<Condition, 'connections'> {
  const pick = (name: Name, key: keyof Figures) => median(phases[name].map((p) => p[key]));
  const figures = (name: Name): Figures => ({
    rps: pick(name, 'rps'),
    p50: pick(name, 'p50'),
    p99: pick(name, 'p99'),
  });
  const summary = Object.fromEntries(names.map((n) => [n, figures(n)])) as Record<Name, Figures>;
  const busy = (p: Phase) => [...p.cpuMs.values()].reduce((a, b) => a + b, 0) / (seconds * 1000);
  return {
    summary,
    ensembleVsSlowest: summary.ensemble.rps / Math.min(summary.small.rps, summary.large.rps),
    ensembleVsPair: summary.ensemble.rps * (1 / summary.small.rps + 1 / summary.large.rps),
    remoteVsPair: summary['ensemble-remote'].rps * (1 / summary.small.rps + 1 / summary.large.rps),
    pipelinedVsPair:
      summary['ensemble-pipelined'].rps * (1 / summary.small.rps + 1 / summary.large.rps),
    overheadP50: summary['router-graph'].p50 - summary.large.p50,
    cpu: Object.fromEntries(names.map((n) => [n, cpuPerRequest(phases[n])])) as Condition['cpu'],
    cores: Object.fromEntries(
      names.map((n) => [n, median(phases[n].map(busy))]),
    ) as Condition['cores'],
    othersCores: Object.fromEntries(
      names.map((n) => [n, median(phases[n].map((p) => p.othersCores))]),
    ) as Condition['othersCores'],
  };
}

const describe: Record<Name, string> = {
  hello: 'functions-framework hello (the ceiling)',
  small: 'small member direct (cloud-infer, edge.onnx)',
  large: 'large member direct (cloud-infer, cloud.onnx)',
  ensemble: 'ensemble graph (static router, both, inner join in the executor)',
  'ensemble-pipelined': 'the same, MLGRAPH_PIPELINE=true (calls of a turn on one connection)',
  'ensemble-remote': 'the same, joined by the joiner function (join.url)',
  'router-graph': 'router graph (Thompson over a, b = large)',
};

const r2 = (n: number) => Number(n.toFixed(2));

function printCondition(c: Condition): void {
  const hello = c.summary.hello.rps;
  printTable(
    `medians, ${c.connections} connection${c.connections === 1 ? '' : 's'} (hello ceiling ${Math.round(hello)} req/s)`,
    ['target', 'req/s', 'x hello', 'p50 ms', 'p99 ms', 'cores: this run', 'others'],
    names.map((n) => [
      describe[n],
      Math.round(c.summary[n].rps),
      r2(c.summary[n].rps / hello),
      r2(c.summary[n].p50),
      r2(c.summary[n].p99),
      r2(c.cores[n]),
      r2(c.othersCores[n]),
    ]),
  );
  process.stdout.write(
    `ensemble / slowest member: ${c.ensembleVsSlowest.toFixed(3)}; ensemble / the pair: ` +
      `${c.ensembleVsPair.toFixed(3)} (pipelined: ${c.pipelinedVsPair.toFixed(3)}; joiner ` +
      `function: ${c.remoteVsPair.toFixed(3)}); ` +
      `router graph p50 - large p50: ${c.overheadP50.toFixed(3)} ms\n`,
  );
}

/** CPU ms per request of each process while one target is loaded: where the time goes. */
function printCpu(c: Condition): void {
  const labels = [...c.cpu.hello.keys()];
  printTable(
    `CPU ms per request by process (medians, ${c.connections} connections; client = the load generator)`,
    ['target', ...labels, 'total'],
    names.map((n) => {
      const row = labels.map((l) => r2(c.cpu[n].get(l) ?? 0));
      return [n, ...row, r2(row.reduce((a, b) => a + b, 0))];
    }),
  );
}

const total = (m: ReadonlyMap<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** CPU ms per request, all processes, per target; and the graph processes' own share. */
function cpuFigures(c: Condition): Record<string, number> {
  const out: Record<string, number> = {};
  for (const n of names) out[`${n.replaceAll('-', '_')}_cpu_ms_per_req`] = r2(total(c.cpu[n]));
  out['ensemble_executor_cpu_ms_per_req'] = r2(c.cpu.ensemble.get('ensemble executor') ?? 0);
  out['ensemble_pipelined_executor_cpu_ms_per_req'] = r2(
    c.cpu['ensemble-pipelined'].get('pipelined executor') ?? 0,
  );
  out['ensemble_remote_executor_cpu_ms_per_req'] = r2(
    c.cpu['ensemble-remote'].get('remote-join executor') ?? 0,
  );
  out['ensemble_remote_joiner_cpu_ms_per_req'] = r2(c.cpu['ensemble-remote'].get('joiner') ?? 0);
  out['router_executor_cpu_ms_per_req'] = r2(c.cpu['router-graph'].get('router executor') ?? 0);
  return out;
}

/**
 * What an ensemble costs over its members, from the processes' CPU counters (machine-
 * independent ratios of the same run): `added` is the CPU the graph adds per request — its
 * executor, the joiner, Redis, and the members' CPU beyond what a direct call costs them — and
 * `xMember` that in units of the costlier member's CPU per direct request (all processes, the
 * load generator's included); `vsMembers` all CPU per ensemble request over the two members'
 * direct-call CPU together.
 */
function graphCost(
  c: Condition,
  target: 'ensemble' | 'ensemble-pipelined' | 'ensemble-remote',
  executor: string,
) {
  const at = (t: Name, label: string) => c.cpu[t].get(label) ?? 0;
  const extra = (member: 'small' | 'large') => Math.max(0, at(target, member) - at(member, member));
  const added =
    at(target, executor) +
    at(target, 'joiner') +
    at(target, 'redis') +
    extra('small') +
    extra('large');
  const small = total(c.cpu.small);
  const large = total(c.cpu.large);
  return {
    added,
    xMember: added / Math.max(small, large),
    vsMembers: total(c.cpu[target]) / (small + large),
  };
}

/** Where an ensemble request's CPU goes, per process, beside the members' direct cost. */
function printGraphCost(c: Condition): void {
  printTable(
    `what the graph adds per ensemble request (CPU ms, ${c.connections} connections)`,
    ['join', 'graph adds', 'x costlier member', 'all CPU / members'],
    (
      [
        ['in the executor', graphCost(c, 'ensemble', 'ensemble executor')],
        ['the same, pipelined', graphCost(c, 'ensemble-pipelined', 'pipelined executor')],
        ['joiner function', graphCost(c, 'ensemble-remote', 'remote-join executor')],
      ] as const
    ).map(([label, g]) => [label, r2(g.added), r2(g.xMember), r2(g.vsMembers)]),
  );
}

/**
 * Why the figures are what they are on this machine: every process shares its cores, so a
 * graph's requests/s is bounded by the CPU all its processes spend per request.
 */
function printNotes(conditions: readonly Condition[], cores: number): void {
  const c = conditions[0]!;
  const slowest = Math.max(total(c.cpu.small), total(c.cpu.large));
  const ensemble = total(c.cpu.ensemble);
  const others = Math.max(...conditions.flatMap((x) => names.map((n) => x.othersCores[n])));
  // The process an ensemble request costs most: the bound if each process had its own core.
  const [busiest, busiestMs] = [...c.cpu.ensemble]
    .filter(([label]) => label !== 'client')
    .sort((a, b) => b[1] - a[1])[0]!;
  process.stdout.write(
    `\nnote: the machine has ${cores} cores and every process — both members, the four executors, the ` +
      `joiner, redis-server, the hello server and the load generator — shares them. An ensemble ` +
      `request costs ${ensemble.toFixed(2)} ms of CPU over all its processes, ` +
      `${(ensemble / slowest).toFixed(1)}x a direct call to the costlier member ` +
      `(${slowest.toFixed(2)} ms): on shared cores its requests/s can only be about ` +
      `1/${(ensemble / slowest).toFixed(1)} of the member's (scaled by the cores each phase keeps ` +
      `busy). With a core per process, as in ` +
      `a cluster, the bound would be the busiest process instead: the ${busiest}, ` +
      `${busiestMs.toFixed(2)} ms per request. The 1-connection condition is latency with cores to ` +
      `spare: no targets, shown for the overhead without queueing.\n`,
  );
  if (others > 0.1) {
    process.stdout.write(
      `note: processes outside this run kept up to ${others.toFixed(2)} of ${cores} cores busy ` +
        `during some phases (column "others"): the figures are understated by that much\n`,
    );
  }
}

export {
  cpuFigures,
  graphCost,
  names,
  printCondition,
  printCpu,
  printGraphCost,
  printNotes,
  summarize,
};
export type { Condition, Name };
