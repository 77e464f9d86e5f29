/**
 * The local stack's failures say at once what to do: Redis unreachable at REDIS_URL, a port in
 * use, redis-server missing, a manifest that does not parse — instead of a readiness timeout
 * a minute later.
 */
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startRedisServer } from '../../local/index.js';
import { readManifest, startLocalStack } from '../../local/stack.js';

const root = new URL('../../', import.meta.url);
const options = { root, bundle: '/nonexistent/serve.mjs' };

describe('the local stack names what is wrong', () => {
  let taken: Server;
  let port: number;
  beforeAll(async () => {
    taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
    port = (taken.address() as { port: number }).port;
  });
  afterAll(() => taken.close());

  it('REDIS_URL pointing at nothing: at once, naming the URL', async () => {
    const nothing = `redis://127.0.0.1:${await freePort()}`;
    // ECONNREFUSED, not "no answer in ... ms": the first refusal ends it, no timeout ran out.
    await expect(startLocalStack({ ...options, redisUrl: nothing })).rejects.toThrow(
      `Redis at ${nothing} (REDIS_URL) is unreachable (ECONNREFUSED): start it there, or unset REDIS_URL to run a private redis-server`,
    );
  });

  it('REDIS_URL with a password: never echoed', async () => {
    const nothing = `redis://:hunter2@127.0.0.1:${await freePort()}`;
    await expect(startLocalStack({ ...options, redisUrl: nothing })).rejects.toThrow(
      /^(?!.*hunter2).*unreachable/,
    );
  });

  it('a port in use: which server, which port, what to do', async () => {
    await expect(startLocalStack({ ...options, apiPort: port })).rejects.toThrow(
      `the development API server cannot listen on 127.0.0.1:${port}: the port is in use (pick another, or 0 for any free port)`,
    );
  });

  it('redis-server not installed: how to install it, or use REDIS_URL', async () => {
    const path = process.env['PATH'];
    process.env['PATH'] = mkdtempSync(join(tmpdir(), 'edgeai-empty-path-'));
    try {
      await expect(startRedisServer()).rejects.toThrow(
        /redis-server is not installed: install it \(apt-get install -y redis-server/,
      );
    } finally {
      process.env['PATH'] = path;
    }
  });

  it('a manifest that does not parse: the file, the line and the column', async () => {
    const copy = mkdtempSync(join(tmpdir(), 'edgeai-root-'));
    cpSync(new URL('knative/', root), join(copy, 'knative'), { recursive: true });
    writeFileSync(
      join(copy, 'knative/services/broken.yaml'),
      'apiVersion: serving.knative.dev/v1\nkind: Service\nmetadata:\n  name: [unclosed\n',
    );
    await expect(startLocalStack({ ...options, root: pathToFileURL(`${copy}/`) })).rejects.toThrow(
      /^knative\/services\/broken\.yaml:\d+:\d+ does not parse: /,
    );
  });

  it('a sample that does not parse, or holds several documents', () => {
    const dir = mkdtempSync(join(tmpdir(), 'edgeai-sample-'));
    writeFileSync(join(dir, 'bad.yaml'), 'spec:\n  edgeWorker: {name: [x\n');
    expect(() => readManifest(pathToFileURL(join(dir, 'bad.yaml')), 'bad.yaml')).toThrow(
      /^bad\.yaml:\d+:\d+ does not parse: /,
    );
    writeFileSync(join(dir, 'two.yaml'), 'a: 1\n---\nb: 2\n');
    expect(() => readManifest(pathToFileURL(join(dir, 'two.yaml')), 'two.yaml')).toThrow(
      'two.yaml: expected one document',
    );
  });
});
