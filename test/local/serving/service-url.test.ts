/**
 * Service URLs inside JSON environment values (an MLGraph's plan in MLGRAPH_GRAPH) are made
 * local by the same rules as a value that is one URL (env.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { rewriteServiceUrls } from '../../../local/serving/index.js';
import type { ServiceRoutes } from '../../../local/serving/index.js';

const routes = (asked: string[] = []): ServiceRoutes => ({
  routeUrl: (namespace, name) => {
    asked.push(`${namespace}/${name}`);
    return `http://127.0.0.1:${7000 + asked.length}`;
  },
  isNamespace: (namespace) => namespace === 'ml',
});

describe('rewriteServiceUrls inside JSON values', () => {
  it('rewrites every Service URL in an MLGraph plan, at any depth, and nothing else', () => {
    const plan = {
      graph: 'ml/g',
      root: 'pick',
      nodes: [
        { name: 'pick', kind: 'router', url: 'http://g-pick.ml.svc.cluster.local', children: [] },
        { name: 'm', kind: 'model', url: 'http://oip.ml.svc/v2?x=1', model: { name: 'm' } },
        { name: 'e', kind: 'model', url: 'https://oip.example/v2' },
        { name: 'short', kind: 'transform', url: 'http://t.ml/x' },
        { name: 'other', kind: 'transform', url: 'http://example.com/x' },
      ],
      // A key that looks like a URL is a key: left alone.
      labels: { 'http://k.ml.svc': ['http://deep.ml.svc.cluster.local'] },
      n: 3,
      ok: true,
      none: null,
    };
    const asked: string[] = [];
    const env = rewriteServiceUrls({ MLGRAPH_GRAPH: JSON.stringify(plan) }, routes(asked));
    const out = JSON.parse(env['MLGRAPH_GRAPH']!) as typeof plan;
    expect(out.nodes.map((n) => n.url)).toEqual([
      'http://127.0.0.1:7001',
      'http://127.0.0.1:7002/v2?x=1',
      'https://oip.example/v2',
      'http://127.0.0.1:7003/x',
      'http://example.com/x',
    ]);
    expect(out.labels).toEqual({ 'http://k.ml.svc': ['http://127.0.0.1:7004'] });
    expect(out).toMatchObject({ graph: 'ml/g', n: 3, ok: true, none: null });
    expect(asked).toEqual(['ml/g-pick', 'ml/oip', 'ml/t', 'ml/deep']);
  });

  it('rewrites the URLs in a JSON array, and keeps as written any JSON with none', () => {
    const env = rewriteServiceUrls(
      {
        LIST: '["http://a.ml.svc", "x"]',
        ROUTE: '{ "kind": "static" }',
        NUMBER: '5',
        QUOTED: '"http://a.ml.svc"',
        BROKEN: '{"url": "http://a.ml.svc"',
        URL: 'http://a.ml.svc',
      },
      routes(),
    );
    expect(env).toEqual({
      LIST: '["http://127.0.0.1:7001","x"]',
      ROUTE: '{ "kind": "static" }',
      NUMBER: '5',
      // Only objects and arrays are read as JSON: a JSON string value is a plain value.
      QUOTED: '"http://a.ml.svc"',
      BROKEN: '{"url": "http://a.ml.svc"',
      URL: 'http://127.0.0.1:7002',
    });
  });
});
