import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['test/support/fc-seed.ts'],
    globalSetup: ['test/support/fc-seed-banner.ts'],
    // Generous bounds for a loaded 2-core host: a case or hook that hangs still fails, but a slow build or gateway
    // start does not (vitest's 5 s and 10 s defaults failed cases that passed alone). Bounds a test promises are its own.
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two files at once (vitest's default on two cores is one): most e2e files wait on polls and timers, so the suite
    // takes ~460 s instead of ~800 s, inside CI's 15 minutes with room.
    maxWorkers: 2,
  },
});
