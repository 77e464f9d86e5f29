/** aset-scheduler's settings, read once at start-up (see docs/aset-scheduler.md). */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { readEnv } from '../config/index.js';
import type { Env } from '../config/index.js';
import { ConfigError } from '../errors/index.js';

const seconds = (min: number, fallback: number) => z.coerce.number().min(min).default(fallback);

const schema = z.object({
  ASET_TOPOLOGY: z.string().regex(/^[a-z0-9-]{1,63}$/, 'must be a topology name ([a-z0-9-])'),
  /** Directories, relative to the working directory (the image's /app) unless absolute. */
  ASET_DATA_DIR: z.string().min(1).default('data/aset'),
  ASET_MODELS_DIR: z.string().min(1).default('models'),
  ASET_WINDOW_SECONDS: seconds(0.001, 25),
  ASET_LEASE_GRACE_SECONDS: seconds(0, 30),
  ASET_TOMBSTONE_SECONDS: seconds(1, 3_600),
  // A resent report must be recognised for longer than the broker goes on redelivering it.
  ASET_DEDUPE_SECONDS: z.coerce.number().int().min(60).default(86_400),
  ASET_ENDPOINT_TEMPLATE: z.string().optional(),
  ASET_REPORT_TOKEN: z
    .string()
    .regex(/^\S{16,}$/, 'must be at least 16 characters, none of them white space')
    .optional(),
});

interface AsetSchedulerConfig {
  topology: string;
  dataDir: URL;
  modelsDir: URL;
  windowMs: number;
  leaseGraceMs: number;
  tombstoneMs: number;
  dedupeSeconds: number;
  /** `{variant}`, `{model}` and `{cluster}` are replaced by the bound worker's. */
  endpointTemplate: string | undefined;
  /** Monitoring agents' bearer token for HTTP response reports; unset, that route answers 403. */
  reportToken: string | undefined;
}

const placeholders = /\{(variant|model|cluster)\}/g;

/** The template filled in with a name made of every allowed character must be an http(s) URL. */
function checkTemplate(template: string): void {
  const unknown = template.replace(placeholders, '').match(/\{[^}]*\}/);
  if (unknown !== null) {
    throw new ConfigError(
      `ASET_ENDPOINT_TEMPLATE: unknown placeholder ${unknown[0]} (use {variant}, {model}, {cluster})`,
    );
  }
  let url: URL;
  try {
    url = new URL(template.replace(placeholders, 'a-1.b_2'));
  } catch {
    throw new ConfigError('ASET_ENDPOINT_TEMPLATE: must be an http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError('ASET_ENDPOINT_TEMPLATE: must be an http(s) URL');
  }
}

/** A directory setting as a URL ending in "/", so files resolve inside it. */
function directory(path: string, cwd: string): URL {
  const full = resolve(cwd, path);
  return pathToFileURL(full.endsWith('/') ? full : `${full}/`);
}

function loadAsetSchedulerConfig(env: Env = process.env, cwd = process.cwd()): AsetSchedulerConfig {
  const raw = readEnv(schema, env);
  if (raw.ASET_ENDPOINT_TEMPLATE !== undefined) checkTemplate(raw.ASET_ENDPOINT_TEMPLATE);
  return {
    topology: raw.ASET_TOPOLOGY,
    dataDir: directory(raw.ASET_DATA_DIR, cwd),
    modelsDir: directory(raw.ASET_MODELS_DIR, cwd),
    windowMs: raw.ASET_WINDOW_SECONDS * 1000,
    leaseGraceMs: raw.ASET_LEASE_GRACE_SECONDS * 1000,
    tombstoneMs: raw.ASET_TOMBSTONE_SECONDS * 1000,
    dedupeSeconds: raw.ASET_DEDUPE_SECONDS,
    endpointTemplate: raw.ASET_ENDPOINT_TEMPLATE,
    reportToken: raw.ASET_REPORT_TOKEN,
  };
}

/** Fills the endpoint template for a worker. */
function endpointFrom(
  template: string,
  worker: { variant: string; model: string; cluster: string },
): string {
  return template.replace(placeholders, (_m, name: 'variant' | 'model' | 'cluster') =>
    encodeURIComponent(worker[name]),
  );
}

export { loadAsetSchedulerConfig, endpointFrom };
export type { AsetSchedulerConfig };
