/**
 * The only file that imports the `cloudevents` SDK: CloudEvents over HTTP in and out.
 * The SDK fills in a missing id or time and ignores malformed ones, which would defeat
 * deduplication by (source, id); so required attributes are checked here before it runs.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { CloudEvent, HTTP, ValidationError as SdkValidationError } from 'cloudevents';
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

function sdkEvent(message: {
  headers: Record<string, string>;
  body: unknown;
}): CloudEvent<unknown> {
  try {
    const decoded = HTTP.toEvent<unknown>(message);
    if (!(decoded instanceof CloudEvent)) {
      throw new ValidationError('batched CloudEvents are not supported');
    }
    decoded.validate();
    return decoded;
  } catch (err) {
    if (err instanceof SdkValidationError) {
      const details = (err.errors ?? [])
        .map((e) => (typeof e === 'string' ? e : `${e.instancePath.slice(1)}: ${e.message ?? ''}`))
        .join('; ');
      throw new ValidationError(`invalid CloudEvent: ${details || err.message}`);
    }
    throw err;
  }
}

function toIncoming(
  mode: IncomingEvent['mode'],
  event: CloudEvent<unknown>,
  data: unknown,
): IncomingEvent {
  const extensions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(event.toJSON())) {
    if (!contextAttributes.has(name) && value !== undefined) extensions[name] = value;
  }
  return Object.freeze({
    mode,
    specversion: event.specversion,
    id: event.id,
    source: event.source,
    type: event.type,
    subject: event.subject,
    time: event.time,
    datacontenttype: event.datacontenttype,
    dataschema: event.dataschema,
    extensions: Object.freeze(extensions),
    data,
  });
}

function decodeBinary(headers: IncomingHttpHeaders, body: Uint8Array): IncomingEvent {
  const flat: Record<string, string> = {};
  const attributes: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.join(',') : value;
    flat[name] = text;
    if (name.startsWith('ce-')) attributes[name.slice(3)] = text;
  }
  parseInput(envelopeSchema, attributes, (path) => `CloudEvent header ce-${path}`);
  checkExtensionNames(Object.keys(attributes).filter((n) => !contextAttributes.has(n)));
  // No Content-Type in binary mode: JSON, the default the SDKs and Knative use when sending.
  const contentType = flat['content-type'] ?? 'application/json';
  flat['content-type'] = contentType;
  const event = sdkEvent({ headers: flat, body: undefined });
  const data = decodeBytes(body, parseMediaType(contentType, 'Content-Type'), 'data');
  return toIncoming('binary', event, data);
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
  const event = sdkEvent({
    headers: { 'content-type': 'application/cloudevents+json' },
    body: fields,
  });
  return toIncoming('structured', event, data);
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

/** Encodes a reply in binary mode: ce-* headers and a JSON body. */
function encodeBinary(event: OutgoingEvent): { headers: Record<string, string>; body: string } {
  const cloudEvent = new CloudEvent<undefined>({
    type: event.type,
    source: event.source,
    datacontenttype: 'application/json',
    ...(event.subject === undefined ? {} : { subject: event.subject }),
    ...event.extensions,
  });
  const { headers } = HTTP.binary(cloudEvent);
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) flat[name] = String(value);
  return { headers: flat, body: event.data === undefined ? '' : JSON.stringify(event.data) };
}

export { decodeEvent, encodeBinary, eventMode };
export type { IncomingEvent, OutgoingEvent };
