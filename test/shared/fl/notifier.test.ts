/**
 * How the aggregator tells a trainer of a round, against a real HTTP server standing in for the
 * trainer: the model pushed with the round (binary, the round in `flstarted`, signed with the
 * trainer's node token); the JSON form naming the model when the trainer has no token, when the
 * model is over the inline limit, or when the trainer refuses the size (413).
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { AggregatorConfig } from '../../../shared/fl/aggregator-config.js';
import { notifier } from '../../../shared/fl/aggregator-runtime.js';
import { createHttpClient, sinkPost } from '../../../shared/http/index.js';
import { roundStarted, roundStartedAttributes } from '../../../shared/messages/federated.js';
import type { FlJobConfig, RoundStarted } from '../../../shared/messages/federated.js';

interface Seen {
  headers: IncomingHttpHeaders;
  body: Buffer;
}

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

/** A trainer that records each request and answers `status(n)` to the n-th (0-based). */
async function trainer(status: (n: number) => number): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(status(seen.length - 1)).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  return { url: `http://127.0.0.1:${address.port}`, seen };
}

function settings(url: string, options: { token?: string; inline?: number }): AggregatorConfig {
  const job = {
    job: 'default/digits',
    uid: 'u1',
    trainers: [{ name: 'digits-edge0', node: 'edge0', url }],
    round: { minParticipants: 1, timeoutMs: 10_000, acceptFailures: true },
  } as unknown as FlJobConfig;
  return {
    job,
    tokens: new Map(
      options.token === undefined ? [] : [['digits-edge0', Buffer.from(options.token)]],
    ),
    leaseMs: 60_000,
    maxUpdateBytes: 1 << 20,
    maxModelBytes: 1 << 20,
    evaluationNice: 10,
    maxDatasetBytes: 1 << 20,
    inlineModelBytes: options.inline ?? 1024,
    eventsUrl: undefined,
    modelRoot: '/tmp',
  };
}

const event: RoundStarted = {
  job: 'default/digits',
  round: 3,
  base: 2,
  model: { url: 'http://127.0.0.1:1/v1/models/2', sha256: 'a'.repeat(64) },
  training: { epochs: 1, batchSize: 10, learningRate: 0.1, seed: 1, proximalMu: 0 },
  deadline: '2030-01-01T00:00:00.000Z',
};
const model = Uint8Array.from({ length: 600 }, (_, i) => i % 251);

describe('the round notifier', () => {
  const http = createHttpClient();
  const post = sinkPost(http.send);
  afterAll(() => http.close());

  it('pushes the model with the round, signed as the trainer\u2019s node', async () => {
    const t = await trainer(() => 200);
    const config = settings(t.url, { token: 'secret' });
    await notifier(config, post)(config.job.trainers[0]!, event, model);
    expect(t.seen).toHaveLength(1);
    const [{ headers, body }] = t.seen as [Seen];
    expect(headers).toMatchObject({
      'content-type': 'application/octet-stream',
      'ce-type': 'io.edgeai.fl.round.started',
      'ce-id': 'default/digits.r3.digits-edge0',
      authorization: 'Bearer secret',
      'x-edgeai-node': 'edge0',
    });
    expect(
      roundStartedAttributes.parse({
        flstarted: decodeURIComponent(String(headers['ce-flstarted'])),
      }),
    ).toEqual({
      flstarted: event,
    });
    expect(new Uint8Array(body)).toEqual(model);
  });

  it('names the model instead when the trainer refuses the size (413)', async () => {
    const t = await trainer((n) => (n === 0 ? 413 : 200));
    const config = settings(t.url, { token: 'secret' });
    await notifier(config, post)(config.job.trainers[0]!, event, model);
    expect(t.seen.map((s) => s.headers['content-type'])).toEqual([
      'application/octet-stream',
      'application/json',
    ]);
    expect(roundStarted.parse(JSON.parse(t.seen[1]!.body.toString()))).toEqual(event);
  });

  it('names the model for a trainer without a token, and for a model over the limit', async () => {
    for (const options of [{}, { token: 'secret', inline: 599 }]) {
      const t = await trainer(() => 200);
      const config = settings(t.url, options);
      await notifier(config, post)(config.job.trainers[0]!, event, model);
      expect(t.seen).toHaveLength(1);
      expect(t.seen[0]!.headers['content-type']).toBe('application/json');
      expect(t.seen[0]!.headers['ce-flstarted']).toBeUndefined();
      await new Promise<void>((resolve) => server?.close(() => resolve()));
    }
  });
});
