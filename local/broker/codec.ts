/**
 * The broker's view of an event: its attributes as strings and its data as the bytes it came
 * with, so that what a subscriber receives is what the sender sent (id, time, data bytes), not a
 * re-encoding. Decoding uses shared/events' decodeEvent (both HTTP modes, required attributes
 * checked); encoding writes binary mode with shared/events' header encoding (encodeBinary itself
 * cannot forward an event: it makes a new id and time).
 */
import type { IncomingHttpHeaders } from 'node:http';
import { decodeEvent, headerValue, parseMediaType } from '../../shared/events/index.js';
import type { IncomingEvent } from '../../shared/events/index.js';

/** An event in the broker. */
interface BrokerEvent {
  /**
   * Context attributes and extensions, as strings: specversion, id, source, type, and whichever
   * of subject, time, datacontenttype, dataschema and extensions the event has.
   */
  readonly attributes: Readonly<Record<string, string>>;
  /** The data's bytes; empty when the event has none. */
  readonly data: Buffer;
}

function isJsonType(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const essence = contentType.split(';', 1)[0]!.trim().toLowerCase();
  return essence === 'application/json' || essence === 'text/json' || essence.endsWith('+json');
}

function asString(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return String(value);
  }
  return JSON.stringify(value);
}

/** The event's context attributes and extensions as strings, datacontenttype aside. */
function attributesOf(incoming: IncomingEvent): Record<string, string> {
  const attributes: Record<string, string> = {
    specversion: incoming.specversion,
    id: incoming.id,
    source: incoming.source,
    type: incoming.type,
  };
  if (incoming.subject !== undefined) attributes['subject'] = incoming.subject;
  if (incoming.time !== undefined) attributes['time'] = incoming.time;
  if (incoming.dataschema !== undefined) attributes['dataschema'] = incoming.dataschema;
  for (const [name, value] of Object.entries(incoming.extensions)) {
    if (value !== undefined && value !== null) attributes[name] = asString(value);
  }
  return attributes;
}

/**
 * A structured-mode envelope's data as bytes: data_base64 as decoded, a string as its text unless
 * the content type is JSON, anything else as JSON.
 */
function structuredData(value: unknown, datacontenttype: string | undefined): Buffer {
  if (value === undefined) return Buffer.alloc(0);
  if (value instanceof Uint8Array) return Buffer.from(value);
  if (typeof value === 'string' && !isJsonType(datacontenttype)) return Buffer.from(value, 'utf8');
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/**
 * The broker event for a decoded event. `body` and `contentType` are the request's: in binary
 * mode the body is the data as sent; in structured mode the data is taken from the envelope.
 */
function fromIncoming(
  incoming: IncomingEvent,
  body: Uint8Array,
  contentType: string | undefined,
): BrokerEvent {
  const attributes = attributesOf(incoming);
  let data: Buffer;
  let datacontenttype = incoming.datacontenttype;
  if (incoming.mode === 'binary') {
    data = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    datacontenttype = contentType ?? datacontenttype;
  } else {
    data = structuredData(incoming.data, datacontenttype);
    if (data.length > 0 && datacontenttype === undefined) datacontenttype = 'application/json';
  }
  if (datacontenttype !== undefined) attributes['datacontenttype'] = datacontenttype;
  return { attributes, data };
}

function headerString(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * Decodes the CloudEvent an HTTP message carries (request or response), or undefined when it
 * carries none. Throws shared/errors' ValidationError (400) or UnsupportedMediaTypeError (415).
 */
function decodeHttpEvent(headers: IncomingHttpHeaders, body: Uint8Array): BrokerEvent | undefined {
  const contentType = headerString(headers['content-type']);
  const media = contentType === undefined ? undefined : parseMediaType(contentType, 'Content-Type');
  const incoming = decodeEvent(headers, body, media);
  return incoming === undefined ? undefined : fromIncoming(incoming, body, contentType);
}

/** The headers of the event in binary mode: ce-* for each attribute, Content-Type for data. */
function binaryHeaders(event: BrokerEvent): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(event.attributes)) {
    if (name === 'datacontenttype') headers['content-type'] = value;
    else headers[`ce-${name}`] = headerValue(value);
  }
  return headers;
}

/** The event with one attribute set, or removed when `value` is undefined. */
function withAttribute(event: BrokerEvent, name: string, value: string | undefined): BrokerEvent {
  const attributes = { ...event.attributes };
  if (value === undefined) delete attributes[name];
  else attributes[name] = value;
  return { attributes, data: event.data };
}

export { decodeHttpEvent, binaryHeaders, withAttribute };
export type { BrokerEvent };
