/**
 * The only file that imports the `cloudevents` SDK: CloudEvents over HTTP in and out.
 * The SDK fills in a missing id or time and ignores malformed ones, which would defeat
 * deduplication by (source, id); so required attributes are checked here before it runs.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { CloudEvent, ValidationError as SdkValidationError } from 'cloudevents';
import { z } from 'zod';
import { UnsupportedMediaTypeError, ValidationError } from '../errors/index.js';
import { parseInput } from '../schema/index.js';
import { decodeBytes, decodeText, parseJson, parseMediaType } from './media.js';
import type { MediaType } from './media.js';

/** A received event: validated attributes, extensions and data decoded by datacontenttype. */
interface IncomingEvent {
  readonly mode: 'binary' | 'structured';
  readonly specversion: string;
  readonly id: string;
  readonly source: string;
  readonly type: string;
  readonly subject: string | undefined;
  readonly time: string | undefined;
  readonly datacontenttype: string | undefined;
  readonly dataschema: string | undefined;
  readonly extensions: Readonly<Record<string, unknown>>;
  readonly data: unknown;
}

/** An event a handler asks to send; id and time are generated. Data is sent as JSON. */
interface OutgoingEvent {
  type: string;
  source: string;
  /** Default: a fresh UUID. A reply that is the same answer each time may fix it (dedupe). */
  id?: string;
  subject?: string;
  data?: unknown;
  extensions?: Readonly<Record<string, string>>;
}

const contextAttributes = new Set([
  'specversion',
  'id',
  'source',
  'type',
  'subject',
  'time',
  'datacontenttype',
  'dataschema',
  'datacontentencoding',
  'schemaurl',
  'data',
  'data_base64',
]);

const envelopeSchema = z.object({
  specversion: z.enum(['1.0', '0.3'], { error: 'must be "1.0" or "0.3"' }),
  id: z.string().min(1).max(256),
  source: z.string().min(1).max(1024),
  type: z.string().min(1).max(256),
  subject: z.string().max(1024).optional(),
  time: z.iso.datetime({ offset: true }).optional(),
});

const extensionName = /^[a-z0-9]{1,20}$/;

/**
 * How a request carries an event: structured (JSON envelope), binary (ce-* headers), or not at
 * all (undefined: a plain HTTP request).
 */
function eventMode(
  headers: IncomingHttpHeaders,
  media: MediaType | undefined,
): IncomingEvent['mode'] | undefined {
  const essence = media?.essence;
  if (essence === 'application/cloudevents+json') return 'structured';
  if (essence === 'application/cloudevents-batch+json') {
    throw new UnsupportedMediaTypeError('batched CloudEvents are not supported: send one event');
  }
  if (essence?.startsWith('application/cloudevents')) {
    throw new UnsupportedMediaTypeError(
      `structured CloudEvents format ${essence} is not supported: use application/cloudevents+json`,
    );
  }
  if (headers['ce-specversion'] !== undefined || headers['ce-id'] !== undefined) return 'binary';
  return undefined;
}

function checkExtensionNames(names: Iterable<string>): void {
  for (const name of names) {
    if (!extensionName.test(name)) {
      throw new ValidationError(
        `CloudEvent attribute ${JSON.stringify(name)}: extension names are 1-20 characters of [a-z0-9]`,
      );
    }
  }
}

/**
 * The SDK's CloudEvent of `fields` (attributes and extensions), checked by the SDK's validator.
 * Built directly rather than through `HTTP.toEvent`, whose header parsing repeats what
 * decodeBinary has done (it copies, lower-cases and maps every header again: 7% of a 3 KB
 * event's request in bench/harness's profile); the validation is the same.
 */
function sdkEvent(fields: Readonly<Record<string, unknown>>): CloudEvent<unknown> {
  try {
    const event = new CloudEvent<unknown>({ ...fields }, false);
    event.validate();
    return event;
  } catch (err) {
    if (err instanceof SdkValidationError) {
      const details = (err.errors ?? [])
        .map((e) => (typeof e === 'string' ? e : `${e.instancePath.slice(1)}: ${e.message ?? ''}`))
        .join('; ');
      throw new ValidationError(`invalid CloudEvent: ${details || err.message}`);
    }
    // The constructor's own checks (schemaurl on 1.0, dataschema on 0.3) throw a TypeError.
    if (err instanceof TypeError) throw new ValidationError(`invalid CloudEvent: ${err.message}`);
    throw err;
  }
}

/**
 * The decoded event. Attributes the sender left out stay undefined (the SDK would fill in a time
 * of its own); extensions are what is left of the sender's attributes.
 */
function toIncoming(
  mode: IncomingEvent['mode'],
  attributes: Readonly<Record<string, unknown>>,
  event: CloudEvent<unknown>,
  data: unknown,
): IncomingEvent {
  const extensions: Record<string, unknown> = {};
  for (const name in attributes) {
    if (!contextAttributes.has(name) && attributes[name] !== undefined)
      extensions[name] = attributes[name];
  }
  const time = attributes['time'];
  return Object.freeze({
    mode,
    specversion: event.specversion,
    id: event.id,
    source: event.source,
    type: event.type,
    subject: event.subject,
    time: typeof time === 'string' ? time : undefined,
    datacontenttype: event.datacontenttype,
    dataschema: event.dataschema,
    extensions: Object.freeze(extensions),
    data,
  });
}

function decodeBinary(headers: IncomingHttpHeaders, body: Uint8Array): IncomingEvent {
  const attributes: Record<string, string> = {};
  for (const name in headers) {
    if (!name.startsWith('ce-')) continue;
    const value = headers[name];
    if (value === undefined) continue;
    attributes[name.slice(3)] = fromHeaderValue(Array.isArray(value) ? value.join(',') : value);
  }
  parseInput(envelopeSchema, attributes, (path) => `CloudEvent header ce-${path}`);
  checkExtensionNames(Object.keys(attributes).filter((n) => !contextAttributes.has(n)));
  // No Content-Type in binary mode: JSON, the default the SDKs and Knative use when sending.
  const contentType = headers['content-type'] ?? 'application/json';
  const event = sdkEvent({ ...attributes, datacontenttype: contentType });
  const data = decodeBytes(body, parseMediaType(contentType, 'Content-Type'), 'data');
  return toIncoming('binary', attributes, event, data);
}

function decodeStructured(media: MediaType, body: Uint8Array): IncomingEvent {
  const envelope = parseJson(decodeText(body, media.charset, 'body'), 'structured CloudEvent');
  if (typeof envelope !== 'object' || envelope === null || Array.isArray(envelope)) {
    throw new ValidationError('structured CloudEvent: body must be a JSON object');
  }
  const fields = { ...(envelope as Record<string, unknown>) };
  parseInput(envelopeSchema, fields, 'CloudEvent');
  checkExtensionNames(Object.keys(fields).filter((n) => !contextAttributes.has(n)));
  let data: unknown = fields['data'];
  if (fields['data_base64'] !== undefined) {
    if (data !== undefined) throw new ValidationError('CloudEvent: both data and data_base64 set');
    if (typeof fields['data_base64'] !== 'string') {
      throw new ValidationError('CloudEvent.data_base64: must be a base64 string');
    }
    data = Buffer.from(fields['data_base64'], 'base64');
    delete fields['data_base64'];
  }
  delete fields['data'];
  const event = sdkEvent(fields);
  return toIncoming('structured', fields, event, data);
}

/**
 * Decodes the CloudEvent a request carries, in either HTTP mode, or returns undefined when the
 * request is not a CloudEvent. Throws ValidationError (400) or UnsupportedMediaTypeError (415).
 */
function decodeEvent(
  headers: IncomingHttpHeaders,
  body: Uint8Array,
  media: MediaType | undefined,
): IncomingEvent | undefined {
  const mode = eventMode(headers, media);
  if (mode === 'binary') return decodeBinary(headers, body);
  if (mode === 'structured' && media !== undefined) return decodeStructured(media, body);
  return undefined;
}

const headerSafe = /^[\x21\x23\x24\x26-\x7e]*$/;

/**
 * Percent-encodes what the HTTP binding (CloudEvents 1.0.2, 3.1.3.2) says a header value must
 * not carry raw: space, double quote, percent and anything outside printable ASCII.
 */
function headerValue(value: string): string {
  if (headerSafe.test(value)) return value;
  let out = '';
  for (const char of value) {
    if (headerSafe.test(char)) out += char;
    else
      for (const byte of Buffer.from(char, 'utf8'))
        out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Reverses headerValue; a value that is not valid percent-encoding is taken as sent. */
function fromHeaderValue(value: string): string {
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * Encodes a reply in binary mode: ce-* headers and a JSON body. Written out directly rather than
 * through the SDK's CloudEvent class, which costs more than the rest of the reply path together
 * and does not percent-encode header values.
 */
function encodeBinary(event: OutgoingEvent): { headers: Record<string, string>; body: string } {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'ce-specversion': '1.0',
    'ce-id': event.id === undefined ? randomUUID() : headerValue(event.id),
    'ce-time': new Date().toISOString(),
    'ce-type': headerValue(event.type),
    'ce-source': headerValue(event.source),
  };
  if (event.subject !== undefined) headers['ce-subject'] = headerValue(event.subject);
  for (const name in event.extensions) {
    headers[`ce-${name}`] = headerValue(event.extensions[name]!);
  }
  return { headers, body: event.data === undefined ? '' : JSON.stringify(event.data) };
}

/**
 * Decodes one event of each mode, with every context attribute the SDK checks a format of (a
 * URI reference, a time, a URI): the first decode is the slowest by far (the SDK's validator and
 * its format expressions compiled, this file's schema's first parse), and a function's first
 * event would otherwise pay it: measured in a federated trainer's first round, 21 ms of CPU
 * against 2 ms for the next (each of 10 trainers sharing two cores). For a process to run once,
 * before its first event.
 */
function warmUp(): void {
  const attributes = {
    specversion: '1.0',
    id: 'warm-up',
    source: '/edgeai/warm-up',
    type: 'io.edgeai.warm-up',
    subject: 'warm-up',
    time: new Date(0).toISOString(),
    dataschema: 'https://edgeai.io/schemas/warm-up',
    warmup: 'true',
  };
  const headers: IncomingHttpHeaders = { 'content-type': 'application/json' };
  for (const [name, value] of Object.entries(attributes)) headers[`ce-${name}`] = value;
  const body = new TextEncoder().encode('{"warm":"up"}');
  decodeEvent(headers, body, parseMediaType('application/json', 'Content-Type'));
  const structured = new TextEncoder().encode(
    JSON.stringify({ ...attributes, datacontenttype: 'application/json', data: { warm: 'up' } }),
  );
  const media = parseMediaType('application/cloudevents+json', 'Content-Type');
  decodeEvent({ 'content-type': 'application/cloudevents+json' }, structured, media);
}

export { decodeEvent, encodeBinary, headerValue, warmUp };
export type { IncomingEvent, OutgoingEvent };
