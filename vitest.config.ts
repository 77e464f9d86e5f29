import { configDefaults, defineConfig } from 'vitest/config';

// The failover tests kill Redis masters and take minutes: `make test-redis-cluster` runs them.
const failover = process.env['EDGEAI_TEST_FAILOVER'] === '1';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: failover ? configDefaults.exclude : [...configDefaults.exclude, 'test/failover/**'],
    globalSetup: ['test/support/global-setup.ts'],
    pool: 'forks',
    testTimeout: 20_000,
    hookTimeout: 30_000,
  },
});
