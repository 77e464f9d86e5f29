import { configDefaults, defineConfig } from 'vitest/config';

// The failover tests kill Redis masters and take minutes: `make test-redis-cluster` runs them.
const failover = process.env['EDGEAI_TEST_FAILOVER'] === '1';
const exclude = failover ? configDefaults.exclude : [...configDefaults.exclude, 'test/failover/**'];

/**
 * The `integration` project (`make integration`): tests that start real child processes (the
 * local stack, redis-server, kubectl, esbuild, node), retrain models or run for seconds. The rest
 * is the `unit` project (`make unit`): in-process code, in-process HTTP servers, and the one
 * Redis of the run (test/support/redis.ts). Measured and classified file by file.
 */
const integration = [
  'test/e2e/**/*.test.ts', // the local stack, the bundle, the committed models over HTTP
  'test/bin/**/*.test.ts', // compiles and bundles bin/, then runs the programs with node
  'test/failover/**/*.test.ts', // SIGKILLs Redis masters (only with EDGEAI_TEST_FAILOVER=1)
  'test/local/kubectl.test.ts', // runs kubectl against the development API server
  'test/local/apiserver/openapi*.test.ts', // runs kubectl explain/apply against it
  'test/local/redis-server.test.ts', // starts and stops redis-server processes
  'test/local/stack-failures.test.ts', // starts the local stack (and redis-server)
  'test/local/serving/supervisor.test.ts', // runs Knative Services as node processes
  'test/packaging/architecture.test.ts', // runs ESLint with type information (~15 s)
  'test/packaging/bundle.test.ts', // builds the image bundle with esbuild
  'test/packaging/knative.test.ts', // runs kubectl kustomize
  'test/packaging/redis-acl.test.ts', // starts a redis-server with the ACL of the manifests
  'test/shared/http/redis-outage.test.ts', // stops and restarts its own redis-server
  'test/shared/redis/idempotency.test.ts', // restarts its own redis-server mid-script
  'test/shared/controller/graph-scenarios.test.ts', // runs kubectl
  'test/shared/status/upstream-concurrency.test.ts', // 2,000 reports over HTTP (~10-25 s)
  'test/shared/training/models.test.ts', // retrains the edge model (~25 s)
  'test/shared/training/detector.test.ts', // retrains the detectors (~8 s)
  'test/research/aset/learn/**/*.test.ts', // trains DQNs
];

/** What both projects share; the root's globalSetup (one Redis) serves both. */
const shared = { pool: 'forks', testTimeout: 20_000, hookTimeout: 30_000 } as const;

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    projects: [
      {
        test: {
          ...shared,
          name: 'unit',
          // Files share their worker's module cache: imports (onnxruntime, client-node, the
          // functions) load once per worker instead of once per file, which halves the lane. A
          // test must leave no global behind (fake timers, process.env, stubs).
          isolate: false,
          include: ['test/**/*.test.ts'],
          exclude: [...exclude, ...integration],
        },
      },
      { test: { ...shared, name: 'integration', include: integration, exclude } },
    ],
  },
});
