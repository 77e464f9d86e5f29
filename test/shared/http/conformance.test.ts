/**
 * The CloudEvents HTTP conformance cases (test/fixtures/cloudevents-conformance), sent as real
 * HTTP requests to a function that accepts any data: every case must be answered 2xx, and the
 * handler must see exactly the attributes and data that were sent.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { defineFunction, onEvent, buildServer } from '../../../shared/http/index.js';
import type { IncomingEvent } from '../../../shared/events/index.js';
import { capturedTelemetry, listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

interface Case {
  Mode?: 'binary' | 'structured';
  ContextAttributes: Record<string, unknown> & { Extensions?: Record<string, string> };
  TransportExtensions?: Record<string, string>;
  Data?: string;
}

const fixtures = new URL('../../fixtures/cloudevents-conformance/', import.meta.url);

function load(file: string): Case[] {
  const text = readFileSync(new URL(file, fixtures), 'utf8');
  // The failsafe schema keeps `1.0` a string, as the conformance README asks.
  return parseAllDocuments(text, { schema: 'failsafe' }).map((doc) => doc.toJS() as Case);
}

function isJson(contentType: string | undefined): boolean {
  return contentType === undefined || /json/i.test(contentType);
}

function request(c: Case, mode: 'binary' | 'structured'): RequestInit {
  const { Extensions = {}, ...attributes } = c.ContextAttributes;
  const contentType = attributes['datacontenttype'] as string | undefined;
  const data = c.Data ?? '';
  if (mode === 'binary') {
    const headers: Record<string, string> = { ...c.TransportExtensions };
    for (const [name, value] of Object.entries({ ...attributes, ...Extensions })) {
      if (name === 'datacontenttype') headers['content-type'] = String(value);
      else headers[`ce-${name}`] = String(value);
    }
    // Bytes, so that fetch adds no Content-Type of its own when the case has none.
    return { method: 'POST', headers, body: new TextEncoder().encode(data) };
  }
  const envelope: Record<string, unknown> = { ...attributes, ...Extensions };
  if (c.Data !== undefined) envelope['data'] = isJson(contentType) ? JSON.parse(data) : data;
  return {
    method: 'POST',
    headers: {
      ...c.TransportExtensions,
      'content-type': 'application/cloudevents+json; charset=UTF-8',
    },
    body: JSON.stringify(envelope),
  };
}

const files = ['v1.yaml', 'v1_minimum.yaml', 'v03.yaml', 'v03_minimum.yaml'];
const cases = files.flatMap((file) =>
  load(file).flatMap((c, index) => {
    const modes = c.Mode === undefined ? (['binary', 'structured'] as const) : [c.Mode];
    return modes.map((mode) => ({ name: `${file}#${index} ${mode}`, c, mode }));
  }),
);

describe('CloudEvents HTTP conformance', () => {
  const received: IncomingEvent[] = [];
  let server: Listening;

  beforeAll(async () => {
    const types = [...new Set(cases.map(({ c }) => String(c.ContextAttributes['type'])))];
    const definition = defineFunction({
      name: 'conformance',
      events: types.map((type) =>
        onEvent({
          type,
          data: z.unknown(),
          handle: async ({ event }) => {
            received.push(event);
            return { kind: 'accepted' };
          },
        }),
      ),
    });
    server = await listen(
      buildServer(definition, {
        telemetry: capturedTelemetry('conformance'),
        bodyLimitBytes: 1 << 20,
        readinessTimeoutMs: 500,
      }),
    );
  });
  afterAll(() => server.close());

  it('covers binary and structured mode of every file', () => {
    expect(cases.length).toBeGreaterThanOrEqual(20);
  });

  it.each(cases)('$name is accepted with its attributes and data intact', async ({ c, mode }) => {
    const before = received.length;
    const res = await fetch(server.url, request(c, mode));
    expect(res.status, await res.text()).toBe(202);
    expect(received).toHaveLength(before + 1);
    const event = received[before]!;
    const { Extensions = {}, ...attributes } = c.ContextAttributes;
    expect(event.mode).toBe(mode);
    expect(event.id).toBe(attributes['id']);
    expect(event.source).toBe(attributes['source']);
    expect(event.type).toBe(attributes['type']);
    expect(event.specversion).toBe(String(attributes['specversion']));
    for (const [name, value] of Object.entries(Extensions)) {
      // HTTP header values cannot end in a line break; fetch trims them in binary mode.
      expect(event.extensions[name]).toBe(mode === 'binary' ? value.trim() : value);
    }
    const contentType = attributes['datacontenttype'] as string | undefined;
    const data = c.Data ?? '';
    const expected: unknown =
      data === '' ? undefined : isJson(contentType) ? (JSON.parse(data) as unknown) : data;
    expect(event.data).toEqual(expected);
  });
});
