import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/support/fc-seed.ts'],
    globalSetup: ['test/support/fc-seed-banner.ts'],
  },
});
