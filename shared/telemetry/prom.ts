/**
 * prom-client, behind a module of our own so that it can be imported on demand (index.ts):
 * imported dynamically, a CommonJS package gives its named exports under Node but only a
 * default export once esbuild has bundled it; re-exported by name from an ES module, it gives
 * them both ways.
 */
export { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
