/** Recording subscribers on ephemeral ports, and the repository's eventing manifests. */
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { KReference } from '../../../local/broker/index.js';
import { listen } from '../../support/http.js';
import { signal } from '../../support/signal.js';
import type { Signal } from '../../support/signal.js';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

export interface Subscriber {
  url: string;
  received: Received[];
  /** Changed on every request received. */
  arrived: Signal;
  /** How the next requests are answered (default: 202, empty). */
  answer: (request: Received, n: number) => Answer;
  close(): Promise<void>;
}

/** An HTTP server that records every request and answers with `answer`. */
export async function subscriber(
  answer: (request: Received, n: number) => Answer = () => ({ status: 202 }),
): Promise<Subscriber> {
  const received: Received[] = [];
  const arrived = signal();
  const sub: Subscriber = { url: '', received, arrived, answer, close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(request);
      const { status, headers = {}, body = '' } = sub.answer(request, received.length);
      res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
      res.end(body);
      arrived.changed();
    });
  });
  const listening = await listen(server);
  sub.url = listening.url;
  sub.close = () => listening.close();
  return sub;
}

/** The contents of every knative/eventing/*.yaml file. */
export function repositoryEventing(): string[] {
  const dir = new URL('../../../knative/eventing/', import.meta.url);
  return readdirSync(dir)
    .filter((name) => name.endsWith('.yaml'))
    .sort()
    .map((name) => readFileSync(new URL(name, dir), 'utf8'));
}

/** A resolver for Knative Services by name (serving.knative.dev/v1), any namespace. */
export function servicesResolver(
  urls: Record<string, string>,
): (ref: KReference) => string | undefined {
  return (ref) =>
    ref.apiVersion === 'serving.knative.dev/v1' && ref.kind === 'Service'
      ? urls[ref.name]
      : undefined;
}
