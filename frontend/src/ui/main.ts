import {
  browserFileVault,
  browserLocks,
  browserUploadPlatform,
  listenDrafts,
  memoryFileVault,
  Paths,
  randomUUID,
  readTheme,
  startConversation,
  TetherClient,
  Uploads,
  uploadsEndpoint,
} from '../lib';
import { mountApp } from './app';
import './styles.css';
import { applyTheme } from './theme';
import { fetchMaxSize, tusTransport } from './tus-transport';

// The chosen theme first, before anything is drawn: no flash of the other one.
// (Not an inline script in index.html: a Content-Security-Policy would block it.)
applyTheme(readTheme(localStorageOrNull()));

/**
 * Entry point. The page itself was the first HTTP request, so the gateway has
 * set its session cookie by now and the WebSocket upgrade carries it.
 */
const client = new TetherClient({
  // A refused upgrade looks like any failure; an ordinary request lets the gateway renew the cookie.
  beforeRetry: async () => {
    await fetch(`${Paths.conversations}?limit=1`, { credentials: 'same-origin', cache: 'no-store' }).catch(() => undefined);
  },
});
const endpoint = uploadsEndpoint();
const uploads = new Uploads({
  storage: localStorageOrNull(),
  vault: browserFileVault() ?? memoryFileVault(),
  transport: tusTransport,
  locks: browserLocks(),
  platform: browserUploadPlatform(),
  uuid: randomUUID,
  endpoint,
  listen: listenDrafts,
});
mountApp(document.getElementById('app')!, client, uploads, localStorageOrNull());
// The URL names the conversation to open (F5, a bookmark, a new tab); `/` opens the stored one.
void client.start(startConversation(location.pathname, randomUUID));
uploads.start();
void fetchMaxSize(endpoint).then((n) => uploads.setMaxSize(n));
// For end-to-end tests and debugging in the console.
(window as unknown as { tether: TetherClient; tetherUploads: Uploads }).tether = client;
(window as unknown as { tetherUploads: Uploads }).tetherUploads = uploads;

function localStorageOrNull(): Storage | null {
  try {
    return globalThis.localStorage ?? null;
  } catch {
    return null; // access denied (some private modes)
  }
}
