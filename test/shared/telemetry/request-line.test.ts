/**
 * The request's log line, built directly (shared/telemetry `logRequest`): byte for byte what
 * pino writes for `log.info(fields, 'request')` but the time, under the same logger settings
 * (redaction included), and nothing below the logger's level.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createTelemetry } from '../../../shared/telemetry/index.js';

/** A telemetry whose destination keeps the raw text written to it. */
function captured(level: string) {
  const written: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      written.push(chunk.toString('utf8'));
      done();
    },
  });
  const telemetry = createTelemetry({
    functionName: 'edge-infer',
    level,
    destination,
    processMetrics: false,
  });
  return { telemetry, written };
}

const untimed = (line: string) => line.replace(/"time":\d+/, '"time":0');

describe('the request log line', () => {
  it.each([
    {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      method: 'POST',
      path: '/v2/models/edge/infer',
      status: 200,
      ms: 1.3,
    },
    {
      traceId: 'a',
      ceId: 'id "quoted" \\ and \u2028',
      ceType: 'edgeai.inference.requested',
      ceSource: '/a/b',
      method: 'GET',
      path: '/x?q=ä&%20',
      status: 404,
      ms: 0,
    },
    { traceId: 'b', method: undefined, path: '/', status: 400, ms: Number.NaN },
    { traceId: 'c', token: 'not nested: nothing to redact', status: 200, ms: 2 },
  ])('is what pino writes for the same fields: %j', async (fields) => {
    const direct = captured('info');
    const viaPino = captured('info');
    direct.telemetry.logRequest(fields);
    viaPino.telemetry.log.info(fields, 'request');
    await new Promise((resolve) => setImmediate(resolve));
    expect(direct.written).toHaveLength(1);
    expect(untimed(direct.written[0]!)).toBe(untimed(viaPino.written[0]!));
    expect(JSON.parse(direct.written[0]!)).toMatchObject({
      level: 30,
      fn: 'edge-infer',
      msg: 'request',
    });
  });

  it('is not written below the logger level', async () => {
    const { telemetry, written } = captured('warn');
    telemetry.logRequest({ traceId: 'a', status: 200, ms: 1 });
    telemetry.log.warn({ traceId: 'a' }, 'still written');
    await new Promise((resolve) => setImmediate(resolve));
    expect(written.map((line) => (JSON.parse(line) as { msg: string }).msg)).toEqual([
      'still written',
    ]);
  });
});
