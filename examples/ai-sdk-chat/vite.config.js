import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// base './': dist/ works from any path of any static server.
export default defineConfig({
  base: './',
  plugins: [react()],
  server: { port: 5173, strictPort: true },
  preview: { port: 5173, strictPort: true },
});
