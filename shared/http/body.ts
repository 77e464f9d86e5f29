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

/** Aligned bodies' memory is kept for reuse in blocks of 64 KB, 128 KB, ... up to this size. */
const keptBlockBytes = 4 << 20;
/** At most this many free blocks of each size are kept. */
const keptPerSize = 8;

/**
 * The memory of aligned bodies (read as `readBody` reads them with `alignAt`), reused. Every
 * ArrayBuffer Node allocates counts as V8 external memory, and a stream of large requests
 * allocating a fresh one per body drives V8 into a full mark-compact every few dozen requests
 * (external memory pressure, with a heap of 15 MB): measured on the edge worker under batch-64
 * binary load, 150-170 full collections in 4 s, a third of the HTTP thread's time. A route that
 * is done with such a body hands it back (`releaseBody`); one that never does costs what it
 * cost before, a buffer for the collector. A block is handed out again only after it came back.
 */
const freeBlocks = new Map<number, ArrayBuffer[]>();
/** Blocks handed out and not yet back: only these may come back, and only once. */
const lentBlocks = new WeakSet<ArrayBuffer>();

/** Block sizes are powers of two from 64 KB: a body of any length fits one. */
function blockBytes(bytes: number): number {
  return 2 ** Math.max(16, Math.ceil(Math.log2(bytes)));
}

/** `bytes` of memory for one aligned body: a free block when there is one. */
function takeBlock(bytes: number): ArrayBuffer {
  const size = blockBytes(bytes);
  const block = freeBlocks.get(size)?.pop() ?? new ArrayBuffer(size);
  lentBlocks.add(block);
  return block;
}

/**
 * Hands back an aligned body's memory for another request: call it once nothing holds a view of
 * the body any more (the route has built its answer, and whatever it keeps is a copy). A body
 * `readBody` did not hand out from its blocks (not aligned, compressed, or from elsewhere), or one
 * already handed back, is ignored.
 */
function releaseBody(body: Uint8Array): void {
  const block = body.buffer;
  if (!(block instanceof ArrayBuffer) || !lentBlocks.has(block)) return;
  lentBlocks.delete(block);
  const size = block.byteLength;
  if (size > keptBlockBytes) return;
  let free = freeBlocks.get(size);
  if (free === undefined) freeBlocks.set(size, (free = []));
  if (free.length < keptPerSize) free.push(block);
}

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
  // Closed while its body waited to be read (server.ts): no event would come.
  if (req.destroyed)
    return done(new Error('the client closed the request before its body was read'), empty);
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
  const length = declared === undefined ? NaN : Number(declared);
  const aligned =
    alignAt !== undefined && compressed === undefined && Number.isSafeInteger(length) && length > 0
      ? Buffer.from(takeBlock(length + 8), (8 - (alignAt % 8)) % 8, length)
      : undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  let finished = false;
  const finish = (err: Error | undefined, body: Buffer) => {
    if (finished) return;
    finished = true;
    req.off('data', onData);
    // Nobody has seen a body that was not read to its end: its block can serve another.
    if (err !== undefined && aligned !== undefined) releaseBody(aligned);
    done(err, body);
  };
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

export { readBody, releaseBody };
