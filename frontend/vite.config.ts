import { defineConfig } from 'vitest/config';

// The build goes straight into the Go package that embeds it. emptyOutDir is
// off because the directory holds a committed .keep file; scripts/clean-dist.mjs
// (prebuild) removes the previous build's index.html and assets/ instead.
export default defineConfig({
  base: '/',
  build: {
    outDir: '../internal/webui/dist',
    emptyOutDir: false,
    target: 'es2022',
    sourcemap: false,
    assetsInlineLimit: 0,
  },
  test: {
    include: ['test/**/*.test.ts'],
    environment: 'node',
  },
});
