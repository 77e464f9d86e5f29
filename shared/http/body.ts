/**
 * Reads a request body with a hard limit. The limit is enforced while reading, so an oversize
 * body costs at most `limit` bytes of memory, not its whole size.
 */
import type { IncomingMessage } from 'node:http';
import { PayloadTooLargeError, UnsupportedMediaTypeError } from '../errors/index.js';

/** Resolves with the whole body, or rejects with a 413 / 415 the caller turns into an answer. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = () =>
    new PayloadTooLargeError(`request body exceeds the limit of ${limit} bytes`);
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge());
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
    return Promise.reject(
      new UnsupportedMediaTypeError(`Content-Encoding ${encoding} is not supported`),
    );
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off('data', onData);
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.once('error', reject);
  });
}

export { readBody };
