/**
 * The trainer's client against a fake aggregator (a real HTTP server): the round status, the
 * model download (origin, size limit, sha256, no redirects), the update as a binary-mode
 * CloudEvent with exactly the protocol's attributes, the failure report, and which answers are
 * worth retrying (AggregatorUnavailableError) and which are not (AggregatorRejectedError).
 */
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PayloadTooLargeError, ValidationError } from '../../../shared/errors/index.js';
import { decodeEvent, eventTypes, parseMediaType } from '../../../shared/events/index.js';
import {
  AggregatorRejectedError,
  AggregatorUnavailableError,
  ModelDigestError,
  createTrainerClient,
} from '../../../shared/fl/client.js';
import type { TrainerClientOptions } from '../../../shared/fl/client.js';
import { decodeWeights, encodeWeights } from '../../../shared/fl/weights.js';
import { flUpdateAttributes, trainerFailed } from '../../../shared/messages/federated.js';
import { createHttpClient } from '../../../shared/http/index.js';
import type { HttpSend } from '../../../shared/http/index.js';
import { listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

interface Reply {
  status: number;
  body?: string | Uint8Array;
  headers?: Record<string, string>;
  /** Never answered (for timeouts). */
  hang?: boolean;
}

const job = 'default/mnist-fl';
const worker = 'dataset-a';
const modelBytes = new TextEncoder().encode('not really a model, but bytes');
const sha256 = createHash('sha256').update(modelBytes).digest('hex');
const json = (status: number, body: unknown): Reply => ({
  status,
  body: JSON.stringify(body),
  headers: { 'content-type': 'application/json' },
});

describe('trainer client', () => {
  let server: Listening;
  const received: Received[] = [];
  let reply: (req: Received) => Reply = () => ({ status: 202 });

  const client = (options: Partial<TrainerClientOptions> = {}) =>
    createTrainerClient({
      aggregatorUrl: server.url,
      job,
      worker,
      node: 'edge-1',
      token: 'secret-token',
      ...options,
    });

  beforeAll(async () => {
    server = await listen(
      createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          const request = {
            method: req.method ?? '',
            path: req.url ?? '',
            headers: req.headers,
            body: Buffer.concat(chunks),
          };
          received.push(request);
          const answer = reply(request);
          if (answer.hang === true) return;
          res.writeHead(answer.status, answer.headers ?? {});
          res.end(answer.body);
        });
      }),
    );
  });
  afterAll(() => server.close());
  beforeEach(() => {
    received.length = 0;
  });

  describe('currentRound', () => {
    it('reads the round status, signed as the node', async () => {
      const status = {
        job,
        round: 3,
        base: 2,
        status: 'open',
        selected: [worker],
        submitted: [],
        deadline: '2030-01-01T00:00:00.000Z',
        model: { url: `${server.url}/models/2`, sha256 },
        training: { epochs: 1, batchSize: 10, learningRate: 0.1, seed: 1 },
      };
      reply = () => json(200, status);
      const got = await client().currentRound();
      expect(got).toMatchObject({ job, round: 3, base: 2, status: 'open', selected: [worker] });
      expect(received).toHaveLength(1);
      expect(received[0]).toMatchObject({ method: 'GET', path: '/v1/round' });
      expect(received[0]!.headers['authorization']).toBe('Bearer secret-token');
      expect(received[0]!.headers['x-edgeai-node']).toBe('edge-1');
    });

    it.each([503, 500, 404, 429])('answers %i as retryable', async (status) => {
      reply = () => json(status, { error: { status, message: 'starting up' } });
      const err = await client()
        .currentRound()
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AggregatorUnavailableError);
      expect((err as AggregatorUnavailableError).status).toBe(status);
      expect((err as Error).message).toContain('starting up');
    });

    it('is retryable when nothing listens (connection refused)', async () => {
      const closed = await listen(createServer());
      const url = closed.url;
      await closed.close();
      await expect(client({ aggregatorUrl: url }).currentRound()).rejects.toThrow(
        AggregatorUnavailableError,
      );
    });

    it('reads at most 1 MiB of a status answer: more is a misbehaving aggregator, retryable', async () => {
      reply = () => ({ status: 200, body: 'x'.repeat((1 << 20) + 1) });
      await expect(client().currentRound()).rejects.toThrow(
        /round status: the answer is more than 1048576 bytes, over the limit of 1048576 bytes/,
      );
      await expect(client().currentRound()).rejects.toThrow(AggregatorUnavailableError);
    });

    it('is retryable when the aggregator does not answer in time', async () => {
      reply = () => ({ status: 200, hang: true });
      await expect(client({ timeoutMs: 20 }).currentRound()).rejects.toThrow(
        /round status: no answer within 20 ms/,
      );
    });

    it('refuses a malformed answer and stops on 401', async () => {
      reply = () => ({ status: 200, body: 'not json' });
      await expect(client().currentRound()).rejects.toThrow(ValidationError);
      reply = () => json(200, { job, round: 1 });
      await expect(client().currentRound()).rejects.toThrow(/round status\.base/);
      reply = () => json(401, { error: { status: 401, message: 'no token' } });
      const err = await client()
        .currentRound()
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AggregatorRejectedError);
      expect((err as AggregatorRejectedError).status).toBe(401);
    });
  });

  describe('fetchModel', () => {
    it('downloads the model and checks its sha256', async () => {
      reply = () => ({ status: 200, body: modelBytes });
      const bytes = await client().fetchModel(`${server.url}/models/1`, sha256, 1024);
      expect(Buffer.from(bytes).equals(Buffer.from(modelBytes))).toBe(true);
      expect(received[0]).toMatchObject({ method: 'GET', path: '/models/1' });
      expect(received[0]!.headers['authorization']).toBe('Bearer secret-token');
    });

    it('refuses bytes of another sha256', async () => {
      reply = () => ({ status: 200, body: modelBytes });
      await expect(
        client().fetchModel(`${server.url}/models/1`, 'a'.repeat(64), 1024),
      ).rejects.toThrow(ModelDigestError);
    });

    it('refuses a model over the limit, declared or streamed', async () => {
      reply = () => ({ status: 200, body: modelBytes });
      await expect(client().fetchModel(`${server.url}/m`, sha256, 10)).rejects.toThrow(
        PayloadTooLargeError,
      );
      // Chunked: no Content-Length, the limit is enforced while reading.
      reply = () => ({
        status: 200,
        body: modelBytes,
        headers: { 'transfer-encoding': 'chunked' },
      });
      await expect(client().fetchModel(`${server.url}/m`, sha256, 10)).rejects.toThrow(
        /over the limit of 10/,
      );
    });

    it('never fetches from another origin, nor follows a redirect', async () => {
      await expect(
        client().fetchModel('http://elsewhere.example:8080/model', sha256, 1024),
      ).rejects.toThrow(/elsewhere\.example:8080\/model is not on the aggregator's origin/);
      expect(received).toHaveLength(0);
      reply = () => ({ status: 302, headers: { location: 'http://elsewhere.example/model' } });
      await expect(client().fetchModel(`${server.url}/m`, sha256, 1024)).rejects.toThrow(
        AggregatorRejectedError,
      );
    });

    it('is retryable on a 5xx', async () => {
      reply = () => ({ status: 502 });
      await expect(client().fetchModel(`${server.url}/m`, sha256, 1024)).rejects.toThrow(
        AggregatorUnavailableError,
      );
    });
  });

  describe('sendUpdate', () => {
    const weights = encodeWeights(
      new Map([['dense1.bias', { dims: [3], values: Float32Array.of(0.5, -1, 2) }]]),
    );
    const update = { round: 4, base: 3, samples: 120, loss: 0.42, trainMs: 1234.6, weights };

    it('sends a binary-mode CloudEvent with exactly the protocol attributes', async () => {
      reply = () => ({ status: 202 });
      expect(await client().sendUpdate(update)).toEqual({ outcome: 'accepted' });
      const [request] = received;
      expect(request).toMatchObject({ method: 'POST', path: '/' });
      const headers = request!.headers;
      expect(
        Object.keys(headers)
          .filter((h) => h.startsWith('ce-'))
          .sort(),
      ).toEqual([
        'ce-flbase',
        'ce-fljob',
        'ce-flloss',
        'ce-flround',
        'ce-flsamples',
        'ce-fltrainms',
        'ce-flworker',
        'ce-id',
        'ce-source',
        'ce-specversion',
        'ce-type',
      ]);
      expect(headers).toMatchObject({
        'ce-specversion': '1.0',
        'ce-type': 'io.edgeai.fl.update',
        'ce-source': `/fl/${job}/trainers/${worker}`,
        'ce-id': `${worker}.r4`,
        'ce-fltrainms': '1235',
        'content-type': 'application/octet-stream',
        authorization: 'Bearer secret-token',
        'x-edgeai-node': 'edge-1',
      });
      const media = parseMediaType(headers['content-type']!, 'Content-Type');
      const event = decodeEvent(headers, request!.body, media)!;
      expect(event.type).toBe(eventTypes.flUpdate);
      expect(flUpdateAttributes.parse(event.extensions)).toEqual({
        fljob: job,
        flworker: worker,
        flround: 4,
        flbase: 3,
        flsamples: 120,
        flloss: 0.42,
        fltrainms: 1235,
      });
      const decoded = decodeWeights(event.data as Uint8Array, { maxBytes: 1 << 20, maxTensors: 8 });
      expect([...decoded.get('dense1.bias')!.values]).toEqual([0.5, -1, 2]);
    });

    it('says duplicate for a 200 and sends no credentials without a token', async () => {
      reply = () => ({ status: 200 });
      expect(await client({ token: undefined }).sendUpdate(update)).toEqual({
        outcome: 'duplicate',
      });
      expect(received[0]!.headers['authorization']).toBeUndefined();
      expect(received[0]!.headers['x-edgeai-node']).toBe('edge-1');
    });

    it.each([
      [
        { error: { status: 409, reason: 'late', message: 'round 4 closed at its deadline' } },
        'late',
      ],
      [{ error: { status: 409, reason: 'ConflictError', refusal: 'stale-base' } }, 'stale-base'],
      [{ outcome: 'refused', reason: 'not-selected' }, 'not-selected'],
      [{ error: { status: 409, reason: 'ConflictError', message: 'no' } }, 'conflict'],
    ])('reads the refusal of a 409 (%j)', async (body, reason) => {
      reply = () => json(409, body);
      const outcome = await client().sendUpdate(update);
      expect(outcome.outcome).toBe('refused');
      expect(outcome.reason?.split(':')[0]).toBe(reason);
    });

    it.each([400, 401, 403, 413])('stops on %i (AggregatorRejectedError)', async (status) => {
      reply = () => json(status, { error: { status, message: 'bad update' } });
      const err = await client()
        .sendUpdate(update)
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AggregatorRejectedError);
      expect((err as AggregatorRejectedError).status).toBe(status);
      expect((err as Error).message).toMatch(new RegExp(`answered ${status} \\(bad update\\)`));
    });

    it.each([500, 503, 504])('is retryable on %i', async (status) => {
      reply = () => ({ status });
      await expect(client().sendUpdate(update)).rejects.toThrow(AggregatorUnavailableError);
    });

    it('is retryable when nothing listens or no answer comes in time; a caller that gives up gets its reason', async () => {
      const closed = await listen(createServer());
      const url = closed.url;
      await closed.close();
      await expect(client({ aggregatorUrl: url }).sendUpdate(update)).rejects.toThrow(
        AggregatorUnavailableError,
      );
      reply = () => ({ status: 202, hang: true });
      await expect(client({ timeoutMs: 20 }).sendUpdate(update)).rejects.toThrow(
        /round 4 update: no answer within 20 ms/,
      );
      const stop = new AbortController();
      const sent = client().sendUpdate(update, stop.signal);
      stop.abort(new Error('round 5 started'));
      await expect(sent).rejects.toThrow('round 5 started');
    });

    it('sends every call through the HttpSend given', async () => {
      reply = () => ({ status: 202 });
      const http = createHttpClient();
      const urls: string[] = [];
      const send: HttpSend = (url, request) => {
        urls.push(url);
        return http.send(url, request);
      };
      try {
        expect(await client({ send }).sendUpdate(update)).toEqual({ outcome: 'accepted' });
        await client({ send }).reportFailure({ job, worker, round: 4, exitCode: 2, message: 'x' });
        expect(urls).toEqual([`${server.url}/`, `${server.url}/`]);
        expect(received[0]!.body.equals(Buffer.from(weights))).toBe(true);
      } finally {
        http.close();
      }
    });
  });

  describe('reportFailure', () => {
    it('sends a JSON CloudEvent, signed as the node, with a deterministic id', async () => {
      reply = () => ({ status: 202 });
      const failure = { job, worker, round: 2, exitCode: 2, message: 'no dataset' };
      await client().reportFailure(failure);
      const [request] = received;
      const headers = request!.headers;
      expect(headers).toMatchObject({
        'ce-type': 'io.edgeai.fl.trainer.failed',
        'ce-source': `/fl/${job}/trainers/${worker}`,
        'ce-id': `${worker}.r2.x2`,
        authorization: 'Bearer secret-token',
        'x-edgeai-node': 'edge-1',
      });
      const event = decodeEvent(
        headers,
        request!.body,
        parseMediaType(headers['content-type']!, 'Content-Type'),
      )!;
      expect(trainerFailed.parse(event.data)).toEqual(failure);
    });

    it('throws when the aggregator does not take it', async () => {
      reply = () => ({ status: 503 });
      await expect(
        client().reportFailure({ job, worker, exitCode: 143, message: 'x' }),
      ).rejects.toThrow(AggregatorUnavailableError);
    });
  });
});
