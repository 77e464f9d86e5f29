/**
 * Reads a request body with a hard limit. The limit is enforced while reading, so an oversize
 * body costs at most `limit` bytes of memory, not its whole size. Callback-based on purpose:
 * this runs on every request, and each promise costs async-hook work once functions-framework
 * has loaded `domain`. A gzip or deflate (zlib) body is decompressed, under the same limit for
 * what it inflates to: OIP clients compress requests (tritonclient's
 * request_compression_algorithm), and their header offsets count the uncompressed bytes.
 */
import type { IncomingMessage } from 'node:http';
import { gunzip, inflate } from 'node:zlib';
import {
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../errors/index.js';

const inflaters = { gzip: gunzip, deflate: inflate } as const;

/** Decompresses `body` (at most `limit` bytes out), copying it aligned when asked (see below). */
function decompress(
  encoding: keyof typeof inflaters,
  body: Buffer,
  limit: number,
  alignAt: number | undefined,
  done: (err: Error | undefined, body: Buffer) => void,
): void {
  inflaters[encoding](body, { maxOutputLength: limit }, (err, out) => {
    if (err !== null) {
      const tooLarge =
        err instanceof RangeError || (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      return done(
        tooLarge
          ? new PayloadTooLargeError(`request body inflates past the limit of ${limit} bytes`)
          : new ValidationError(`body: not valid ${encoding} data (Content-Encoding ${encoding})`),
        Buffer.alloc(0),
      );
    }
    if (alignAt === undefined) return done(undefined, out);
    const aligned = Buffer.from(
      new ArrayBuffer(out.length + 8),
      (8 - (alignAt % 8)) % 8,
      out.length,
    );
    out.copy(aligned);
    done(undefined, aligned);
  });
}

/**
 * Calls `done` once, with the whole body or with a 413 / 415 to answer. With `alignAt` and a
 * declared length, the body is read into one buffer with byte `alignAt` 8-byte aligned (see
 * `AlignBodyAt`): one copy from the socket's chunks, none to line the numbers up later.
 */
function readBody(
  req: IncomingMessage,
  limit: number,
  done: (err: Error | undefined, body: Buffer) => void,
  alignAt?: number,
): void {
  const empty = Buffer.alloc(0);
  const tooLarge = () =>
    new PayloadTooLargeError(`request body exceeds the limit of ${limit} bytes`);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return done(tooLarge(), empty);
  const encoding = req.headers['content-encoding']?.trim().toLowerCase();
  const compressed = encoding === 'gzip' || encoding === 'deflate' ? encoding : undefined;
  if (encoding !== undefined && encoding !== 'identity' && compressed === undefined) {
    return done(
      new UnsupportedMediaTypeError(
        `Content-Encoding ${encoding} is not supported (gzip, deflate or identity)`,
      ),
      empty,
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  const finish = (err: Error | undefined, body: Buffer) => {
    if (finished) return;
    finished = true;
    req.off('data', onData);
    done(err, body);
  };
  const length = declared === undefined ? NaN : Number(declared);
  const aligned =
    alignAt !== undefined && compressed === undefined && Number.isSafeInteger(length) && length > 0
      ? Buffer.from(new ArrayBuffer(length + 8), (8 - (alignAt % 8)) % 8, length)
      : undefined;
  const onData = (chunk: Buffer) => {
    if (size + chunk.length > limit) return finish(tooLarge(), empty);
    // Node's parser stops at Content-Length, so an aligned body cannot overflow.
    if (aligned !== undefined) chunk.copy(aligned, size);
    else chunks.push(chunk);
    size += chunk.length;
  };
  req.on('data', onData);
  req.once('end', () => {
    if (aligned !== undefined) return finish(undefined, aligned.subarray(0, size));
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    if (compressed === undefined) return finish(undefined, body);
    decompress(compressed, body, limit, alignAt, finish);
  });
  req.once('error', (err) => finish(err, empty));
}

export { readBody };
