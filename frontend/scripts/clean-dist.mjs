// Removes the previous build from internal/webui/dist, leaving the committed
// .keep file (and anything else not produced by the build) in place.
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'internal', 'webui', 'dist');
for (const name of ['index.html', 'assets']) {
  rmSync(join(dist, name), { recursive: true, force: true });
}
