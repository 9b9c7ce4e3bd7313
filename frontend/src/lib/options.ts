import type { BackoffOptions } from './backoff';
import type { FetchLike } from './http';
import type { Platform } from './platform';
import type { LinkBus, LinkElector } from './shared';
import type { KeyValue } from './storage';
import type { TabChannel } from './tabsync';

/** The options of a TetherClient; every one has a default that works in a browser. */
export interface ClientOptions {
  /** WebSocket URL; default `/v1/ws` on the page's origin. A function is called before every connect. */
  url?: string | (() => string);
  platform?: Platform;
  /** Where pointers live; default localStorage. null keeps them in memory. */
  storage?: KeyValue | null;
  /** Channel to the other tabs; default BroadcastChannel (storage event fallback). null: none. */
  channel?: TabChannel | null;
  /** Makes task and conversation ids; default crypto.randomUUID. */
  uuid?: () => string;
  /** History page size (1..200); default 50. */
  pageSize?: number;
  backoff?: BackoffOptions;
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  /** Ping period and pong timeout while a followed answer streams; default 5 s and 3 s. */
  streamingPingIntervalMs?: number;
  streamingPingTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** See ConnectionOptions.beforeRetry. */
  beforeRetry?: () => Promise<void>;
  /**
   * Delay before the first retry of a subscribe the server refused for a
   * passing reason (rate_limited, unavailable), ms; it doubles with each
   * failure, up to 30 s.
   */
  resubscribeDelayMs?: number;
  /** Retries of one refused subscribe before the tab gives up and shows why; default 8. */
  maxSubscribeRetries?: number;
  /**
   * Tasks the tab remembers; beyond it, finished tasks that the open
   * conversation does not show are forgotten (history has them). Default 500.
   */
  maxTasks?: number;
  /** Requests that may wait for the connection (see ConnectionOptions.maxQueued); default 256. */
  maxQueued?: number;
  /** The HTTP API's fetch (renames, deletes, the fallback); default the browser's on this origin. */
  fetch?: FetchLike;
  /** Failed WebSocket upgrades in a row, while HTTP answers, before the HTTP fallback; default 2. */
  fallbackAfter?: number;
  /** How often the HTTP fallback reads what a WebSocket would have pushed, ms; default 10 s. */
  pollMs?: number;
  /**
   * One socket per browser: the tabs elect a leader (elector) that holds the
   * WebSocket and serves the others over bus. Default: BroadcastChannel and
   * the Web Locks API where both exist and no platform is given; null, or a
   * browser without either, gives each tab a socket of its own.
   */
  sharing?: { bus: LinkBus; elector: LinkElector; onLeave?: (fn: () => void) => () => void } | null;
  /** This tab's id among the tabs sharing a socket; default a random UUID. */
  tabId?: string;
}
