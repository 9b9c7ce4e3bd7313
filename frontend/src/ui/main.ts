import { Paths, TetherClient } from '../lib';
import { mountApp } from './app';
import './styles.css';

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
mountApp(document.getElementById('app')!, client);
void client.start();
// For end-to-end tests and debugging in the console.
(window as unknown as { tether: TetherClient }).tether = client;
