/** Starting a built function server on an ephemeral port, and capturing its log lines. */
import type { Server } from 'node:http';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { createTelemetry } from '../../shared/telemetry/index.js';
import type { Telemetry } from '../../shared/telemetry/index.js';

export interface Listening {
  url: string;
  close(): Promise<void>;
}

export async function listen(server: Server): Promise<Listening> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** Telemetry whose log lines are kept (parsed) in `lines` instead of printed. */
export function capturedTelemetry(
  functionName: string,
): Telemetry & { lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const telemetry = createTelemetry({
    functionName,
    level: 'info',
    destination,
    processMetrics: false,
  });
  return Object.assign(telemetry, { lines });
}

let eventCounter = 0;

/** POSTs a binary-mode CloudEvent with a JSON body (fresh id unless `headers` sets ce-id). */
export function postEvent(
  url: string,
  type: string,
  data: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  eventCounter += 1;
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'ce-specversion': '1.0',
      'ce-id': `test-event-${eventCounter}`,
      'ce-source': 'https://kubernetes.default.svc',
      'ce-type': type,
      ...headers,
    },
    body: JSON.stringify(data),
  });
}
