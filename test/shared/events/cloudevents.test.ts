import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../../shared/errors/index.js';
import { isEventType } from '../../../shared/events/catalogue.js';
import {
  decodeEvent,
  encodeBinary,
  eventTypes,
  parseMediaType,
} from '../../../shared/events/index.js';

import { warmUp } from '../../../shared/events/cloudevents.js';

const bytes = (text: string) => Buffer.from(text, 'utf8');
const structured = parseMediaType('application/cloudevents+json', 'Content-Type');

describe('decodeEvent', () => {
  it('is undefined for a plain HTTP request', () => {
    expect(
      decodeEvent(
        { 'content-type': 'application/json' },
        bytes('{}'),
        parseMediaType('application/json', 'x'),
      ),
    ).toBeUndefined();
  });

  it('decodes data_base64 to bytes in structured mode', () => {
    const body = JSON.stringify({
      specversion: '1.0',
      id: '1',
      source: '/s',
      type: 't',
      data_base64: Buffer.from([1, 2, 255]).toString('base64'),
    });
    const event = decodeEvent({}, bytes(body), structured);
    expect(event?.data).toEqual(Buffer.from([1, 2, 255]));
  });

  it('refuses both data and data_base64', () => {
    const body = JSON.stringify({
      specversion: '1.0',
      id: '1',
      source: '/s',
      type: 't',
      data: 1,
      data_base64: 'AQ==',
    });
    expect(() => decodeEvent({}, bytes(body), structured)).toThrow(/both data and data_base64/);
  });

  it('keeps a JSON scalar as data (the framework parser would reject it)', () => {
    const headers = { 'ce-specversion': '1.0', 'ce-id': '1', 'ce-source': '/s', 'ce-type': 't' };
    expect(decodeEvent(headers, bytes('"hello"'), undefined)?.data).toBe('hello');
    expect(decodeEvent(headers, bytes('42'), undefined)?.data).toBe(42);
    expect(decodeEvent(headers, bytes(''), undefined)?.data).toBeUndefined();
  });

  it('passes binary data through as bytes', () => {
    const headers = {
      'ce-specversion': '1.0',
      'ce-id': '1',
      'ce-source': '/s',
      'ce-type': 't',
      'content-type': 'application/octet-stream',
    };
    expect(
      decodeEvent(headers, Buffer.from([0, 159]), parseMediaType('application/octet-stream', 'x'))
        ?.data,
    ).toEqual(Buffer.from([0, 159]));
  });

  it('rejects an id longer than 256 characters, which would become a Redis key', () => {
    const headers = {
      'ce-specversion': '1.0',
      'ce-id': 'x'.repeat(257),
      'ce-source': '/s',
      'ce-type': 't',
    };
    expect(() => decodeEvent(headers, bytes('{}'), undefined)).toThrow(ValidationError);
  });

  it('rejects invalid UTF-8 text data', () => {
    const headers = {
      'ce-specversion': '1.0',
      'ce-id': '1',
      'ce-source': '/s',
      'ce-type': 't',
      'content-type': 'text/plain',
    };
    expect(() =>
      decodeEvent(headers, Buffer.from([0xff, 0xfe]), parseMediaType('text/plain', 'x')),
    ).toThrow(/not valid utf-8/);
  });
});

describe('encodeBinary', () => {
  it('sends JSON data with ce-* headers, a fresh id and time', () => {
    const { headers, body } = encodeBinary({
      type: eventTypes.inferenceCompleted,
      source: '/f',
      subject: 's',
      data: 'scalar',
    });
    expect(JSON.parse(body)).toBe('scalar');
    expect(headers).toMatchObject({
      'ce-type': 'io.edgeai.inference.completed',
      'ce-source': '/f',
      'ce-subject': 's',
      'ce-specversion': '1.0',
      'content-type': 'application/json',
    });
    expect(headers['ce-id']).toBeTruthy();
    expect(Date.parse(headers['ce-time'] ?? '')).not.toBeNaN();
  });
});

describe('event catalogue', () => {
  it('is frozen, unique, and reverse-DNS under the API group for our own types', () => {
    expect(Object.isFrozen(eventTypes)).toBe(true);
    const values = Object.values(eventTypes);
    expect(new Set(values).size).toBe(values.length);
    for (const type of values) expect(type).toMatch(/^(io\.edgeai|dev\.knative)\.[a-z.-]+$/);
    expect(isEventType('io.edgeai.inference.requested')).toBe(true);
    expect(isEventType('io.edgeai.nope')).toBe(false);
  });
});

describe('the codec warm-up', () => {
  it('decodes its sample events of both modes (one the codec refused would warm nothing)', () => {
    expect(() => warmUp()).not.toThrow();
  });
});
