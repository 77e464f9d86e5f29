/**
 * Where the CPU goes during a phase (Linux /proc): each thread of the server process, this
 * process (the load client, or the in-process model), and the whole machine, so what other
 * processes took during the phase shows beside the figures. Elsewhere the snapshots are empty
 * and the attribution is left out.
 */
import { readFileSync, readdirSync } from 'node:fs';

/** /proc times are in clock ticks: USER_HZ, 100 on every Linux Node.js runs on. */
const msPerTick = 10;

interface Snapshot {
  /** CPU ms by thread id of the server process. */
  threads: Map<string, number>;
  /** CPU ms of this process, all threads. */
  self: number;
  /** CPU ms busy on the whole machine, all cores. */
  machine: number;
  at: number;
}

function threadTimes(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Fields after the command (which may hold spaces): state is 3, utime 14, stime 15.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, (Number(fields[11]) + Number(fields[12])) * msPerTick);
    }
  } catch {
    // No /proc, or the process is gone: no attribution.
  }
  return out;
}

function machineBusy(): number {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
    const [user, nice, system, , , irq, softirq, steal] = fields.map(Number);
    return (user! + nice! + system! + irq! + softirq! + steal!) * msPerTick;
  } catch {
    return Number.NaN;
  }
}

function snapshot(pid: number): Snapshot {
  const usage = process.cpuUsage();
  return {
    threads: threadTimes(pid),
    self: (usage.user + usage.system) / 1000,
    machine: machineBusy(),
    at: performance.now(),
  };
}

/** CPU ms spent between two snapshots: the server's threads, this process, everything else. */
interface Spent {
  /** By server thread id. */
  threads: Map<string, number>;
  self: number;
  /** Machine busy time not spent by the server or this process. */
  others: number;
  wallMs: number;
}

function spent(from: Snapshot, to: Snapshot): Spent {
  const threads = new Map<string, number>();
  for (const [tid, ms] of to.threads) threads.set(tid, ms - (from.threads.get(tid) ?? 0));
  const server = [...threads.values()].reduce((a, b) => a + b, 0);
  const self = to.self - from.self;
  return {
    threads,
    self,
    others: Math.max(0, to.machine - from.machine - server - self),
    wallMs: to.at - from.at,
  };
}

export { snapshot, spent };
export type { Snapshot, Spent };
