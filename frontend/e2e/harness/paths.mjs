// Where the harness finds the binaries and Chromium, and where it leaves
// screenshots and logs.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const artifacts = path.join(root, 'test-artifacts', 'e2e');
export const logDir = path.join(artifacts, 'logs');
export const bin = (name) => path.join(process.env.TETHER_BIN_DIR || path.join(root, 'bin'), name);
export const chromiumPath = process.env.TETHER_CHROMIUM || '/usr/bin/chromium';
