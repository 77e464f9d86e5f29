/** CloudEvents: the type catalogue, HTTP decoding and encoding, media types. */
export { eventTypes } from './catalogue.js';
export { decodeEvent, encodeBinary, headerValue } from './cloudevents.js';
export { parseMediaType } from './media.js';
export { createEventSink, SinkRefusedError } from './sink.js';
export type { IncomingEvent, OutgoingEvent } from './cloudevents.js';
export type { MediaType } from './media.js';
export type { Sink, SinkEvent, SinkPost } from './sink.js';
