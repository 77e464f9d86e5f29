/**
 * bench/offload: what the edge worker's synchronous offload costs its process per call, through
 * the client it uses (shared/inference/cloud-client.ts on shared/http's node:http client) and,
 * in the same run, through the same client on Node's fetch (what it used before): one 784-float
 * sample as an OIP binary request to a stand-in cloud worker in another process (server.ts), 8
 * calls in flight. Rounds alternate the two clients; each reports the bench process's CPU time
 * (user + system, process counters) per call and calls per second, medians of the rounds.
 * Reported, no target.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import type { HttpSend } from '../../shared/http/index.js';
import { createCloudClient } from '../../shared/inference/cloud-client.js';
import type { Tensor } from '../../shared/inference/tensor.js';
import { finish, median, printTable } from '../support/report.js';

const rounds = Number(process.env['BENCH_ROUNDS'] ?? 6);
const callsPerRound = 8_000;
const inFlight = 8;

/** The same HttpSend contract on fetch, as the client called the cloud before. */
const fetchSend: HttpSend = async (url, call) => {
  const response = await fetch(url, {
    method: call.method,
    headers: call.headers,
    ...(call.body === undefined ? {} : { body: call.body }),
    signal: call.signal ?? AbortSignal.timeout(call.timeoutMs),
  });
  const body = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    header: (name) => response.headers.get(name) ?? undefined,
    body,
  };
};

async function standIn(): Promise<{ url: string; stop(): void }> {
  const child = fork(fileURLToPath(new URL('./server.js', import.meta.url)), [], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const [message] = (await once(child, 'message')) as [{ port: number }];
  return { url: `http://127.0.0.1:${message.port}`, stop: () => child.kill() };
}

/** `calls` offloads, `inFlight` at a time: CPU microseconds per call and calls per second. */
async function measure(client: ReturnType<typeof createCloudClient>, calls: number) {
  const inputs: Record<string, Tensor> = {
    input: { datatype: 'FP32', shape: [1, 784], data: new Float32Array(784).fill(0.5) },
  };
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let done = 0; done < calls; done += inFlight)
    await Promise.all(Array.from({ length: inFlight }, () => client.infer(inputs, ['probs'])));
  const { user, system } = process.cpuUsage(cpu);
  return { cpuUs: (user + system) / calls, rate: calls / ((performance.now() - started) / 1000) };
}

export async function main(): Promise<void> {
  const cloud = await standIn();
  try {
    const options = {
      url: cloud.url,
      model: 'cloud',
      deadlineMs: 5000,
      retries: 0,
      breakerFailures: 5,
      halfOpenMs: 1000,
    };
    const clients = {
      'node:http (shared/http)': createCloudClient(options),
      fetch: createCloudClient({ ...options, send: fetchSend }),
    };
    const samples = new Map<string, Array<{ cpuUs: number; rate: number }>>();
    // Warm-up: both paths compiled, connections open.
    for (const client of Object.values(clients)) await measure(client, callsPerRound / 4);
    for (let round = 0; round < rounds; round += 1) {
      const order = Object.entries(clients);
      if (round % 2 === 1) order.reverse();
      for (const [name, client] of order)
        samples.set(name, [...(samples.get(name) ?? []), await measure(client, callsPerRound)]);
    }
    const summary = (name: string) => {
      const runs = samples.get(name) ?? [];
      return { cpuUs: median(runs.map((r) => r.cpuUs)), rate: median(runs.map((r) => r.rate)) };
    };
    const lean = summary('node:http (shared/http)');
    const fetched = summary('fetch');
    printTable(
      `offload of one 784-float sample, ${inFlight} in flight, medians of ${rounds} rounds of ${callsPerRound.toLocaleString('en-US')} calls`,
      ['client', 'CPU us per call', 'calls/s'],
      [
        ['node:http (shared/http)', lean.cpuUs, Math.round(lean.rate)],
        ['fetch', fetched.cpuUs, Math.round(fetched.rate)],
      ],
    );
    finish(
      'offload',
      {
        offload_cpu_us_node_http: lean.cpuUs,
        offload_cpu_us_fetch: fetched.cpuUs,
        offload_fetch_over_node_http_cpu: fetched.cpuUs / lean.cpuUs,
        offload_calls_per_s_node_http: lean.rate,
        offload_calls_per_s_fetch: fetched.rate,
      },
      {},
    );
  } finally {
    cloud.stop();
  }
}
