/**
 * Metrics with prom-client loaded on first use (shared/telemetry): what a function defines and
 * records before it has loaded is all in the first scrape, in definition order, and once loaded
 * a recording is in the next scrape at once.
 */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createTelemetry, defineMetrics } from '../../../shared/telemetry/index.js';

const quiet = () =>
  new Writable({
    write(_chunk, _encoding, done) {
      done();
    },
  });

function telemetry(functionName: string) {
  return createTelemetry({
    functionName,
    level: 'info',
    destination: quiet(),
    processMetrics: false,
  });
}

/** The value of the sample line `name` (with its labels, as written) in a scrape. */
function sample(body: string, name: string): number | undefined {
  const line = body.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe('metrics', () => {
  it('keeps what is defined and recorded before prom-client loads, for the first scrape', async () => {
    const t = telemetry('early');
    const m = defineMetrics(t);
    const jobs = m.counter('test_jobs_total', 'jobs', ['outcome']);
    const sizes = m.histogram('test_size', 'sizes', [1, 10], ['kind']);
    let depth = 3;
    m.gauge('test_depth', 'depth', () => depth);
    jobs({ outcome: 'ok' });
    jobs({ outcome: 'ok' }, 2);
    jobs({ outcome: 'failed' });
    sizes({ kind: 'a' }, 5);
    t.observe('POST /x', 200, 0.002);
    t.observe('POST /x', 200, 0.02);
    t.observe('POST /x', 400, 0.001);
    depth = 7;
    const { contentType, body } = await t.scrape();
    expect(contentType).toMatch(/^text\/plain/);
    expect(sample(body, 'test_jobs_total{outcome="ok",function="early"}')).toBe(3);
    expect(sample(body, 'test_jobs_total{outcome="failed",function="early"}')).toBe(1);
    expect(sample(body, 'test_size_bucket{le="10",function="early",kind="a"}')).toBe(1);
    expect(sample(body, 'test_size_bucket{le="1",function="early",kind="a"}')).toBe(0);
    expect(sample(body, 'test_depth{function="early"}')).toBe(7);
    expect(
      sample(body, 'edgeai_requests_total{kind="POST /x",status="200",function="early"}'),
    ).toBe(2);
    expect(
      sample(body, 'edgeai_requests_total{kind="POST /x",status="400",function="early"}'),
    ).toBe(1);
    expect(
      sample(body, 'edgeai_request_duration_seconds_count{function="early",kind="POST /x"}'),
    ).toBe(3);
    // The request metrics first, then the function's own, in the order they were defined.
    const order = ['edgeai_requests_total', 'edgeai_request_duration_seconds', 'test_jobs_total']
      .concat(['test_size', 'test_depth'])
      .map((name) => body.indexOf(`# HELP ${name} `));
    expect(order.every((at, i) => at >= 0 && (i === 0 || at > order[i - 1]!))).toBe(true);
  });

  it('records at once once loaded, in a registry of its own per function', async () => {
    const a = telemetry('a');
    const b = telemetry('b');
    await a.scrape();
    await b.scrape();
    const count = defineMetrics(a).counter('test_after_total', 'after');
    count();
    a.observe('GET /y', 200, 0.001);
    const body = (await a.scrape()).body;
    expect(sample(body, 'test_after_total{function="a"}')).toBe(1);
    expect(sample(body, 'edgeai_requests_total{kind="GET /y",status="200",function="a"}')).toBe(1);
    expect((await b.scrape()).body).not.toContain('test_after_total');
  });
});
