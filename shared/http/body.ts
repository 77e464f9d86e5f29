/**
 * Reads a request body with a hard limit. The limit is enforced while reading, so an oversize
 * body costs at most `limit` bytes of memory, not its whole size. Callback-based on purpose:
 * this runs on every request, and each promise costs async-hook work once functions-framework
 * has loaded `domain`.
 */
import type { IncomingMessage } from 'node:http';
import { PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors/index.js';

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
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    return done(
      new UnsupportedMediaTypeError(`Content-Encoding ${encoding} is not supported`),
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
    alignAt !== undefined && Number.isSafeInteger(length) && length > 0
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
    finish(undefined, chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
  });
  req.once('error', (err) => finish(err, empty));
}

export { readBody };
