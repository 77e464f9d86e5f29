/**
 * Bytes to values by media type, shared by CloudEvent data and plain HTTP bodies, so both
 * reject the same things with the same words.
 */
import { TextDecoder } from 'node:util';
import { parse as parseContentType } from 'content-type';
import { UnsupportedMediaTypeError, ValidationError } from '../errors/index.js';

/** A parsed Content-Type: lower-cased essence and its charset, if any. */
interface MediaType {
  essence: string;
  charset: string | undefined;
}

/** RFC 9110 token "/" token. */
const essencePattern = /^[a-z0-9!#$%&'*+.^_`|~-]+\/[a-z0-9!#$%&'*+.^_`|~-]+$/;

/** Parses a Content-Type header value; a malformed one is the caller's error (400). */
function parseMediaType(header: string, label: string): MediaType {
  const malformed = () =>
    new ValidationError(`${label}: malformed media type ${JSON.stringify(header)}`);
  let parsed;
  try {
    parsed = parseContentType(header);
  } catch {
    throw malformed();
  }
  const essence = parsed.type.toLowerCase();
  if (!essencePattern.test(essence)) throw malformed();
  return { essence, charset: parsed.parameters['charset'] || undefined };
}

/** JSON by RFC 6839: application/json, text/json, or any +json suffix. */
function isJsonMedia(essence: string): boolean {
  return essence === 'application/json' || essence === 'text/json' || essence.endsWith('+json');
}

/** Types whose bytes are text in a charset (and so are handed to handlers as strings). */
function isTextMedia(essence: string): boolean {
  return (
    essence.startsWith('text/') ||
    essence === 'application/xml' ||
    essence.endsWith('+xml') ||
    essence === 'application/x-www-form-urlencoded'
  );
}

/** Decodes text strictly: a wrong byte is a 400, an unknown charset a 415. */
function decodeText(bytes: Uint8Array, charset: string | undefined, label: string): string {
  let decoder: TextDecoder;
  try {
    decoder = new TextDecoder(charset ?? 'utf-8', { fatal: true });
  } catch {
    throw new UnsupportedMediaTypeError(`${label}: unsupported charset ${JSON.stringify(charset)}`);
  }
  try {
    return decoder.decode(bytes);
  } catch {
    throw new ValidationError(`${label}: bytes are not valid ${charset ?? 'utf-8'}`);
  }
}

/** Parses JSON text; any JSON value (including a bare string or number) is accepted. */
function parseJson(text: string, label: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    throw new ValidationError(`${label}: not valid JSON (${detail})`);
  }
}

/**
 * Turns bytes into the value a handler sees: parsed JSON for JSON types, a string for text types,
 * the bytes themselves otherwise. An empty body is `undefined`.
 */
function decodeBytes(bytes: Uint8Array, media: MediaType | undefined, label: string): unknown {
  if (bytes.length === 0) return undefined;
  if (media === undefined) return bytes;
  if (isJsonMedia(media.essence)) return parseJson(decodeText(bytes, media.charset, label), label);
  if (isTextMedia(media.essence)) return decodeText(bytes, media.charset, label);
  return bytes;
}

export { parseMediaType, isJsonMedia, decodeText, decodeBytes, parseJson };
export type { MediaType };
