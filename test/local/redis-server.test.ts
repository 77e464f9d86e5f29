/**
 * The private redis-server: with a data directory (npm run local --snapshot) its data survives a
 * stop and start; without one it starts empty. A real redis-server, as everywhere in the tests.
 */
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startRedisServer } from '../../local/index.js';

/** One inline command, its first reply line. */
function command(port: number, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => socket.write(`${line}\r\n`));
    socket.once('data', (chunk: Buffer) => {
      socket.end();
      resolve(chunk.toString('utf8').split('\r\n').slice(0, 2).join(' '));
    });
    socket.once('error', reject);
  });
}

describe('startRedisServer', () => {
  it('keeps its data across a restart with a data directory, and reports its pid', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'edgeai-redis-')), 'redis');
    const server = await startRedisServer({ dataDir });
    try {
      const pid = server.pid;
      expect(pid).toBeGreaterThan(0);
      expect(await command(server.port, 'SET kept yes')).toBe('+OK ');
      await server.stop();
      expect(server.pid).toBeUndefined();
      await server.start();
      expect(server.pid).not.toBe(pid);
      expect(await command(server.port, 'GET kept')).toBe('$3 yes');
    } finally {
      await server.stop();
    }
  });

  it('starts empty without one', async () => {
    const server = await startRedisServer();
    try {
      await command(server.port, 'SET gone yes');
      await server.stop();
      await server.start();
      expect(await command(server.port, 'GET gone')).toBe('$-1 ');
    } finally {
      await server.stop();
    }
  });
});
