/**
 * Where a worker's model comes from: a Model's `spec.url`. file:// paths must resolve inside the
 * model root (no `..` escapes, no symlink games: the real path is checked); http(s):// downloads
 * are size-capped (the body is refused once it is known to be larger), cached by URL under the
 * cache directory, and checked against the expected sha256 when one is given (a mismatch refuses
 * the model, cached copy included).
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, realpath, rename, writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, PayloadTooLargeError } from '../errors/index.js';
import { createHttpClient, succeeded } from '../http/index.js';
import type { HttpAnswer, HttpCall, HttpSend } from '../http/index.js';

interface ModelSource {
  url: string;
  sha256: string | undefined;
  /** Directory file:// models must live in. */
  root: string;
  /** Where downloaded models are kept. */
  cacheDir: string;
  maxBytes: number;
  timeoutMs: number;
  /** How http(s) models are downloaded (default: shared/http's node:http client). */
  send?: HttpSend;
}

const digest = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

function verify(bytes: Uint8Array, expected: string | undefined, where: string): Uint8Array {
  if (expected !== undefined && digest(bytes) !== expected) {
    throw new ConfigError(
      `MODEL_SHA256: ${where} has sha256 ${digest(bytes)}, expected ${expected}`,
    );
  }
  return bytes;
}

async function fromFile(url: URL, source: ModelSource): Promise<Uint8Array> {
  let path: string;
  try {
    path = fileURLToPath(url);
  } catch (err) {
    throw new ConfigError(`MODEL_URL: ${err instanceof Error ? err.message : String(err)}`);
  }
  const root = await realpath(source.root).catch(() => {
    throw new ConfigError(`MODEL_ROOT: ${source.root} does not exist`);
  });
  const real = await realpath(path).catch(() => {
    throw new ConfigError(`MODEL_URL: ${url.href} does not exist`);
  });
  if (!real.startsWith(root + sep)) {
    throw new ConfigError(`MODEL_URL: ${url.href} is outside the model root ${source.root}`);
  }
  return verify(new Uint8Array(await readFile(real)), source.sha256, url.href);
}

/** The answer to a GET of `url`, through `source.send` or a client of its own, closed after. */
async function download(url: URL, source: ModelSource): Promise<HttpAnswer> {
  const call: HttpCall = {
    method: 'GET',
    headers: {},
    timeoutMs: source.timeoutMs,
    maxBytes: source.maxBytes,
  };
  if (source.send !== undefined) return source.send(url.href, call);
  const http = createHttpClient();
  try {
    return await http.send(url.href, call);
  } finally {
    http.close();
  }
}

async function fromHttp(url: URL, source: ModelSource): Promise<Uint8Array> {
  const cached = join(source.cacheDir, `${digest(new TextEncoder().encode(url.href))}.onnx`);
  const hit = await readFile(cached).then(
    (b) => new Uint8Array(b),
    () => undefined,
  );
  const usable = hit !== undefined && hit.length <= source.maxBytes;
  if (usable && (source.sha256 === undefined || digest(hit) === source.sha256)) return hit;
  const answer = await download(url, source).catch((err: unknown) => {
    // Over maxBytes is refused as soon as it is known: declared, or counted while reading.
    const why =
      err instanceof PayloadTooLargeError
        ? `is over ${source.maxBytes} bytes`
        : `${err instanceof Error ? err.message : String(err)}`;
    throw new ConfigError(`MODEL_URL: ${url.href}: ${why}`);
  });
  if (!succeeded(answer.status))
    throw new ConfigError(`MODEL_URL: ${url.href} answered ${answer.status}`);
  const bytes = new Uint8Array(answer.body.buffer, answer.body.byteOffset, answer.body.length);
  verify(bytes, source.sha256, url.href);
  await mkdir(source.cacheDir, { recursive: true });
  // Written aside then renamed, so a crash never leaves a half file that looks cached.
  const partial = `${cached}.${process.pid}.part`;
  await writeFile(partial, bytes);
  await rename(partial, cached);
  return bytes;
}

/** The model's bytes, or a ConfigError naming the variable and the problem. */
async function loadModelBytes(source: ModelSource): Promise<Uint8Array> {
  let url: URL;
  try {
    url = new URL(source.url);
  } catch {
    throw new ConfigError(`MODEL_URL: not a URL: ${source.url}`);
  }
  if (url.protocol === 'file:') return fromFile(url, source);
  if (url.protocol === 'http:' || url.protocol === 'https:') return fromHttp(url, source);
  throw new ConfigError(`MODEL_URL: ${url.protocol} is not supported (file:, http:, https:)`);
}

export { loadModelBytes };
export type { ModelSource };
