import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = fileURLToPath(new URL('./src/', import.meta.url));

export default defineConfig({
  // Examples import the package by name, as a user would (tsconfig `paths` for tsc and tsx).
  resolve: {
    alias: [
      { find: /^scaler-primitives$/, replacement: `${src}index.ts` },
      { find: /^scaler-primitives\/(.+)$/, replacement: `${src}$1/index.ts` },
    ],
  },
  test: {
    // Example tests (examples/NN-*.test.ts) are documentation that runs in CI.
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // System tests create network namespaces and start servers: keep files apart.
    fileParallelism: true,
    pool: 'forks',
  },
});
