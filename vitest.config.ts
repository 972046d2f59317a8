import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // System tests create network namespaces and start servers: keep files apart.
    fileParallelism: true,
    pool: 'forks',
  },
});
