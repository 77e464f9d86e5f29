/**
 * Where a worker's model comes from: a Model's `spec.url`. file:// paths must resolve inside the
 * model root (no `..` escapes, no symlink games: the real path is checked); http(s):// downloads
 * are size-capped, cached by URL under the cache directory, and checked against the expected
 * sha256 when one is given (a mismatch refuses the model, cached copy included).
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, realpath, rename, writeFile } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors/index.js';

interface ModelSource {
  url: string;
  sha256: string | undefined;
  /** Directory file:// models must live in. */
  root: string;
  /** Where downloaded models are kept. */
  cacheDir: string;
  maxBytes: number;
  timeoutMs: number;
  fetch?: typeof fetch;
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

async function fromHttp(url: URL, source: ModelSource): Promise<Uint8Array> {
  const cached = join(source.cacheDir, `${digest(new TextEncoder().encode(url.href))}.onnx`);
  const hit = await readFile(cached).then(
    (b) => new Uint8Array(b),
    () => undefined,
  );
  if (hit !== undefined && (source.sha256 === undefined || digest(hit) === source.sha256))
    return hit;
  const response = await (source.fetch ?? fetch)(url, {
    signal: AbortSignal.timeout(source.timeoutMs),
  }).catch((err: unknown) => {
    throw new ConfigError(
      `MODEL_URL: ${url.href}: ${err instanceof Error ? err.message : String(err)}`,
    );
  });
  if (!response.ok) throw new ConfigError(`MODEL_URL: ${url.href} answered ${response.status}`);
  const length = Number(response.headers.get('content-length') ?? 0);
  if (length > source.maxBytes)
    throw new ConfigError(`MODEL_URL: ${url.href} is over ${source.maxBytes} bytes`);
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (bytes.length > source.maxBytes)
    throw new ConfigError(`MODEL_URL: ${url.href} is over ${source.maxBytes} bytes`);
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
