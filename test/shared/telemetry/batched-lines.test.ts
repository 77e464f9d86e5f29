/**
 * stdout's batches (shared/telemetry batchedLines): a line is written within flushMs of the first
 * line of its batch, several lines in one write, and a logger with nothing to write writes
 * nothing (no empty write on a period).
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { batchedLines } from '../../../shared/telemetry/index.js';

afterEach(() => {
  vi.useRealTimers();
});

function file() {
  return join(mkdtempSync(join(tmpdir(), 'batched-lines-')), 'out.log');
}

describe("stdout's batches of log lines", () => {
  it('writes nothing while idle, then a batch of lines once, flushMs after its first line', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    const path = file();
    const stream = batchedLines(path) as ReturnType<typeof batchedLines> & NodeJS.EventEmitter;
    await once(stream, 'ready');
    const writes: number[] = [];
    stream.on('write', (bytes: number) => writes.push(bytes));

    await vi.advanceTimersByTimeAsync(1000);
    expect(writes).toEqual([]);

    stream.write('{"msg":"one"}\n');
    stream.write('{"msg":"two"}\n');
    await vi.advanceTimersByTimeAsync(99);
    expect(readFileSync(path, 'utf8')).toBe('');
    const written = once(stream, 'write');
    await vi.advanceTimersByTimeAsync(1);
    await written;
    expect(readFileSync(path, 'utf8')).toBe('{"msg":"one"}\n{"msg":"two"}\n');
    expect(writes).toEqual([28]);

    await vi.advanceTimersByTimeAsync(1000);
    expect(writes).toEqual([28]);
  });
});
