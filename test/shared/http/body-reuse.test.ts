/**
 * Aligned bodies' memory is reused (shared/http/body.ts): a body handed back with releaseBody
 * serves the next aligned body of its size, byte for byte the new request's own; a body not
 * handed back, or handed back twice, is never lent to two requests at once. Over real HTTP.
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBody, releaseBody } from '../../../shared/http/body.js';
import { listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

/** Where the JSON header ends in these bodies, as Inference-Header-Content-Length would say. */
const alignAt = 13;
const read: Buffer[] = [];
let server: Listening;

beforeAll(async () => {
  server = await listen(
    createServer((req, res) => {
      readBody(
        req,
        8 << 20,
        (err, body) => {
          if (err !== undefined) {
            res.statusCode = 400;
            res.end(err.message);
            return;
          }
          read.push(body);
          res.end('ok');
        },
        alignAt,
      );
    }),
  );
});
afterAll(() => server.close());

/** Sends `bytes` bytes of `fill`; returns the body the server read, not yet handed back. */
async function send(bytes: number, fill: number): Promise<Buffer> {
  const answer = await fetch(server.url, { method: 'POST', body: Buffer.alloc(bytes, fill) });
  expect(await answer.text()).toBe('ok');
  const body = read.shift();
  if (body === undefined) throw new Error('the server read no body');
  return body;
}

describe('aligned bodies', () => {
  it('are read aligned at the header length', async () => {
    const body = await send(200_000, 1);
    expect((body.byteOffset + alignAt) % 8).toBe(0);
    expect(body.length).toBe(200_000);
    releaseBody(body);
  });

  it('reuse the memory of a body handed back, holding only the new request bytes', async () => {
    const first = await send(120_000, 0xaa);
    const memory = first.buffer;
    releaseBody(first);
    // The same size of block (128 KB), a shorter body: none of the first one shows through.
    const second = await send(70_000, 0x55);
    expect(second.buffer).toBe(memory);
    expect(second.length).toBe(70_000);
    expect(second.every((b) => b === 0x55)).toBe(true);
    releaseBody(second);
  });

  it('never lend a body that was not handed back', async () => {
    const held = await send(300_000, 1);
    const next = await send(300_000, 2);
    expect(next.buffer).not.toBe(held.buffer);
    expect(held.every((b) => b === 1)).toBe(true);
    releaseBody(held);
    releaseBody(next);
  });

  it('take a body handed back twice back once', async () => {
    const body = await send(500_000, 3);
    releaseBody(body);
    releaseBody(body);
    const a = await send(500_000, 4);
    const b = await send(500_000, 5);
    expect(a.buffer).not.toBe(b.buffer);
    expect(a.every((x) => x === 4)).toBe(true);
    expect(b.every((x) => x === 5)).toBe(true);
    releaseBody(a);
    releaseBody(b);
  });

  it('ignore a body that is not theirs', async () => {
    // Memory of the very size a 100,000-byte body takes (128 KB), but not lent by readBody.
    const own = Buffer.from(new ArrayBuffer(128 << 10), 0, 100_000).fill(6);
    releaseBody(own);
    const body = await send(100_000, 7);
    expect(body.buffer).not.toBe(own.buffer);
    releaseBody(body);
  });
});
