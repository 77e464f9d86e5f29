/**
 * One phase of load: `connections` keep-alive autocannon clients for a fixed time on one target,
 * with the CPU each process of the run spent meanwhile (Linux /proc; elsewhere left out).
 */
import autocannon from 'autocannon';
import { snapshot } from '../foreign-model/cpu.js';

interface Request {
  method: 'POST';
  headers: Record<string, string>;
  body: string;
}

interface Phase {
  rps: number;
  p50: number;
  p99: number;
  answered: number;
  /** CPU ms spent during the phase, by process label; `client` is this process. */
  cpuMs: Map<string, number>;
  /** Cores kept busy meanwhile by processes not of this run (another job on the machine). */
  othersCores: number;
}

/** CPU ms of each labelled process and of this one, and the machine's busy ms, at one instant. */
function cpuNow(pids: ReadonlyMap<string, number>) {
  const byLabel = new Map<string, number>();
  let self = 0;
  let machine = 0;
  for (const [label, pid] of pids) {
    const s = snapshot(pid);
    self = s.self;
    machine = s.machine;
    byLabel.set(
      label,
      [...s.threads.values()].reduce((a, b) => a + b, 0),
    );
  }
  byLabel.set('client', self);
  return { byLabel, machine, at: performance.now() };
}

/**
 * Percentiles from each response's own time (autocannon's histogram keeps whole milliseconds,
 * too coarse for a sub-millisecond overhead); requests/s from the 200s answered in the phase.
 */
async function phase(
  target: { name: string; url: string },
  request: Request,
  options: { connections: number; seconds: number; pids: ReadonlyMap<string, number> },
): Promise<Phase> {
  const latencies: number[] = [];
  const before = cpuNow(options.pids);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const job = autocannon(
      {
        url: target.url,
        ...request,
        connections: options.connections,
        duration: options.seconds,
      },
      (err, done) => (err === null || err === undefined ? resolve(done) : reject(err as Error)),
    );
    job.on('response', (_client, status, _bytes, ms) => {
      if (status === 200) latencies.push(ms);
    });
  });
  const after = cpuNow(options.pids);
  if (result.non2xx > 0 || result.errors > 0 || latencies.length === 0) {
    throw new Error(
      `${target.name} (${target.url}): ${result.non2xx} non-2xx answers, ${result.errors} errors, ` +
        `${latencies.length} 200s`,
    );
  }
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.floor(q * (latencies.length - 1))]!;
  const cpuMs = new Map(
    [...after.byLabel].map(([label, ms]) => [label, ms - (before.byLabel.get(label) ?? 0)]),
  );
  const ours = [...cpuMs.values()].reduce((a, b) => a + b, 0);
  const othersMs = Math.max(0, after.machine - before.machine - ours);
  return {
    rps: latencies.length / options.seconds,
    p50: at(0.5),
    p99: at(0.99),
    answered: latencies.length,
    cpuMs,
    othersCores: othersMs / (after.at - before.at),
  };
}

export { phase };
export type { Phase, Request };
