/**
 * Random requests (methods, paths, CloudEvent headers, content types, bodies) at a function:
 * every answer is a 2xx or a 4xx naming a problem, never a 5xx, and the server keeps serving.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { buildServer, defineFunction, onEvent, onRequest } from '../../../shared/http/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const definition = defineFunction({
  name: 'fuzzed',
  events: [
    onEvent({
      type: 'io.edgeai.test.echo',
      data: z.object({ n: z.number() }),
      replies: ['io.edgeai.test.echoed'],
      handle: async ({ data }) => ({
        kind: 'reply',
        event: { type: 'io.edgeai.test.echoed', data },
      }),
    }),
  ],
  routes: [
    onRequest({
      method: 'POST',
      path: '/things/:id',
      params: z.object({ id: z.string().max(10) }),
      body: z.array(z.number()).max(5),
      handle: async ({ body }) => ({
        kind: 'json',
        body: { sum: body.reduce((a, b) => a + b, 0) },
      }),
    }),
  ],
});

const header = fc.oneof(
  fc.constant(undefined),
  fc.string({ maxLength: 40 }),
  fc.constantFrom('1.0', '0.3', 'io.edgeai.test.echo', '/s'),
);
const contentType = fc.oneof(
  fc.constant(undefined),
  fc.constantFrom(
    'application/json',
    'application/json; charset=utf-8',
    'application/json; charset=latin1',
    'application/cloudevents+json',
    'application/cloudevents+json; charset=UTF-8',
    'application/cloudevents-batch+json',
    'text/plain',
    'text/plain; charset=nope',
    'application/octet-stream',
    'multipart/form-data; boundary=x',
  ),
  fc.string({ maxLength: 30 }),
);
const body = fc.oneof(
  fc.constant(''),
  fc.json(),
  fc.string({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a).toString('latin1')),
  fc
    .record({ specversion: header, id: header, source: header, type: header, data: fc.jsonValue() })
    .map((o) => JSON.stringify(o)),
);
const path = fc.oneof(
  fc.constantFrom(
    '/',
    '/things/a',
    '/things/%ZZ',
    '/things/',
    '/health/readiness',
    '/metrics',
    '/x/y/z',
    '/things/a%2Fb',
    '/favicon.ico',
  ),
  fc.webPath(),
);

describe('shared/http under random input', () => {
  let server: Listening;
  beforeAll(async () => {
    server = await listen(
      buildServer(definition, {
        telemetry: capturedTelemetry('fuzzed'),
        bodyLimitBytes: 150,
        readinessTimeoutMs: 100,
      }),
    );
  });
  afterAll(() => server.close());

  it('never answers 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('GET', 'POST', 'PUT', 'DELETE'),
        path,
        fc.record({
          'ce-specversion': header,
          'ce-id': header,
          'ce-source': header,
          'ce-type': header,
          'content-type': contentType,
        }),
        body,
        async (method, urlPath, rawHeaders, text) => {
          const headers: Record<string, string> = {};
          for (const [name, value] of Object.entries(rawHeaders)) {
            // fetch itself refuses header values with control characters; skip those.
            if (value !== undefined && /^[\x20-\x7e]*$/.test(value)) headers[name] = value;
          }
          const res = await fetch(
            server.url + (urlPath.startsWith('/') ? urlPath : `/${urlPath}`),
            {
              method,
              headers,
              ...(method === 'GET' ? {} : { body: Buffer.from(text, 'latin1') }),
            },
          );
          const answer = await res.text();
          expect(
            res.status,
            `${method} ${urlPath} ${JSON.stringify(headers)} -> ${answer}`,
          ).toBeLessThan(500);
          if (res.status >= 400) expect(answer).toMatch(/"message":"[^"]+/);
        },
      ),
      { numRuns: 400, seed: 20261122 },
    );
    expect((await fetch(`${server.url}/health/liveness`)).status).toBe(200);
  });
});
