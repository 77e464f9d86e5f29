/**
 * Where a worker's model comes from (shared/inference/model-source.ts), against a real HTTP
 * server and real files: a download checked against its sha256 and cached by URL; a body over
 * the size cap refused whether its length is declared or only counted while reading (chunked),
 * without the rest being read; an error status; file:// paths kept inside the model root.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModelBytes } from '../../../shared/inference/model-source.js';
import { listen } from '../../support/http.js';
import type { Listening } from '../../support/http.js';

const model = Uint8Array.from({ length: 4096 }, (_, i) => (i * 7) % 251);
const sha256 = createHash('sha256').update(model).digest('hex');

describe('the model source', () => {
  let dir: string;
  let server: Listening;
  const served: string[] = [];
  /** How much of a chunked body the server got to write before the client hung up. */
  let chunkedWritten = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'edgeai-model-source-'));
    server = await listen(
      createServer((req, res) => {
        served.push(req.url ?? '');
        if (req.url?.startsWith('/model') === true) return res.writeHead(200).end(model);
        if (req.url === '/chunked.onnx') {
          // No Content-Length: 64 KiB at a time until the client stops reading.
          res.writeHead(200, { 'transfer-encoding': 'chunked' });
          const chunk = Buffer.alloc(64 << 10, 1);
          const more = () => {
            while (chunkedWritten < 64 << 20) {
              chunkedWritten += chunk.length;
              if (!res.write(chunk)) return void res.once('drain', more);
            }
            res.end();
          };
          res.on('close', () => res.removeAllListeners('drain'));
          return more();
        }
        res.writeHead(404).end('no such model');
      }),
    );
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const source = (url: string, over: { sha256?: string; maxBytes?: number } = {}) => ({
    url,
    sha256: over.sha256,
    root: join(dir, 'models'),
    cacheDir: join(dir, 'cache'),
    maxBytes: over.maxBytes ?? 1 << 20,
    timeoutMs: 5000,
  });

  it('downloads a model, checks its sha256 and serves it from the cache after', async () => {
    const url = `${server.url}/model.onnx`;
    served.length = 0;
    expect(await loadModelBytes(source(url, { sha256 }))).toEqual(model);
    expect(await loadModelBytes(source(url, { sha256 }))).toEqual(model);
    expect(served).toEqual(['/model.onnx']);
    await expect(loadModelBytes(source(url, { sha256: '0'.repeat(64) }))).rejects.toThrow(
      /MODEL_SHA256: .* has sha256 [0-9a-f]{64}, expected 0{64}/,
    );
    // Nor is a cached copy over a cap lowered since.
    await expect(loadModelBytes(source(url, { maxBytes: 1000 }))).rejects.toThrow(
      /is over 1000 bytes/,
    );
  });

  it('refuses a body over the cap, declared or counted while reading, without reading it all', async () => {
    await expect(
      loadModelBytes(source(`${server.url}/model-2.onnx`, { maxBytes: 1000 })),
    ).rejects.toThrow(/MODEL_URL: .*\/model-2\.onnx: is over 1000 bytes/);
    await expect(
      loadModelBytes(source(`${server.url}/chunked.onnx`, { maxBytes: 1 << 20 })),
    ).rejects.toThrow(/chunked\.onnx: is over 1048576 bytes/);
    // The server wrote far less than its 64 MiB: the client stopped at the cap.
    expect(chunkedWritten).toBeLessThan(16 << 20);
  });

  it('names the status of a model that is not there', async () => {
    await expect(loadModelBytes(source(`${server.url}/missing.onnx`))).rejects.toThrow(
      /MODEL_URL: .*\/missing\.onnx answered 404/,
    );
  });

  it('reads file:// models inside the model root only', async () => {
    mkdirSync(join(dir, 'models'), { recursive: true });
    writeFileSync(join(dir, 'models', 'local.onnx'), model);
    writeFileSync(join(dir, 'outside.onnx'), model);
    symlinkSync(join(dir, 'outside.onnx'), join(dir, 'models', 'link.onnx'));
    const file = (name: string) => pathToFileURL(join(dir, 'models', name)).href;
    expect(await loadModelBytes(source(file('local.onnx'), { sha256 }))).toEqual(model);
    await expect(loadModelBytes(source(file('../outside.onnx')))).rejects.toThrow(
      /is outside the model root/,
    );
    await expect(loadModelBytes(source(file('link.onnx')))).rejects.toThrow(
      /is outside the model root/,
    );
  });
});
