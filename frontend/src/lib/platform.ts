/**
 * Everything the client needs from its environment, behind one interface so
 * the state machines run unchanged in a browser and in unit tests (with a fake
 * socket, fake timers and a fake clock).
 */

/** The part of the browser WebSocket the client uses. */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}

export type TimerHandle = unknown;

export interface Platform {
  createSocket(url: string): SocketLike;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(h: TimerHandle): void;
  now(): number;
  random(): number;
  /** navigator.onLine; true where unknown. */
  online(): boolean;
  /** Calls back on `online`/`offline`; returns a function that stops it. */
  onOnlineChange(cb: (online: boolean) => void): () => void;
  /** document.visibilityState === 'visible'; true where unknown. */
  visible(): boolean;
  onVisibilityChange(cb: (visible: boolean) => void): () => void;
  /**
   * Calls fn once, before the next paint (requestAnimationFrame), so work
   * that only feeds the screen is done once a frame however often it is
   * asked for. A hidden tab paints nothing and gets no frames: a timer
   * stands behind it, so fn still runs (timers there run about once a second).
   */
  requestFrame(fn: () => void): TimerHandle;
  cancelFrame(h: TimerHandle): void;
}

/** How long a frame may be waited for before the timer behind it runs it (ms). */
const frameBackstopMs = 100;

/** The browser's platform. */
export function browserPlatform(): Platform {
  const g = globalThis as typeof globalThis & { document?: Document; navigator?: Navigator };
  return {
    createSocket: (url) => new WebSocket(url) as unknown as SocketLike,
    setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
    clearTimeout: (h) => globalThis.clearTimeout(h as ReturnType<typeof setTimeout>),
    now: () => Date.now(),
    random: () => Math.random(),
    online: () => (g.navigator ? g.navigator.onLine !== false : true),
    onOnlineChange: (cb) => {
      if (typeof g.addEventListener !== 'function') return () => {};
      const on = () => cb(true);
      const off = () => cb(false);
      g.addEventListener('online', on);
      g.addEventListener('offline', off);
      return () => {
        g.removeEventListener('online', on);
        g.removeEventListener('offline', off);
      };
    },
    visible: () => (g.document ? g.document.visibilityState !== 'hidden' : true),
    onVisibilityChange: (cb) => {
      const doc = g.document;
      if (!doc) return () => {};
      const h = () => cb(doc.visibilityState !== 'hidden');
      doc.addEventListener('visibilitychange', h);
      return () => doc.removeEventListener('visibilitychange', h);
    },
    requestFrame: (fn) => {
      const raf = typeof g.requestAnimationFrame === 'function' ? g.requestAnimationFrame.bind(g) : null;
      const f: { frame?: number; timer?: ReturnType<typeof setTimeout> } = {};
      const run = () => {
        if (f.frame !== undefined) g.cancelAnimationFrame(f.frame);
        globalThis.clearTimeout(f.timer);
        fn();
      };
      if (raf) f.frame = raf(run);
      f.timer = globalThis.setTimeout(run, raf ? frameBackstopMs : 16);
      return f;
    },
    cancelFrame: (h) => {
      const f = h as { frame?: number; timer?: ReturnType<typeof setTimeout> };
      if (f.frame !== undefined) g.cancelAnimationFrame(f.frame);
      globalThis.clearTimeout(f.timer);
    },
  };
}

/** The WebSocket URL of path on the page's own origin (ws: or wss: to match). */
export function sameOriginWsUrl(path: string, loc: { protocol: string; host: string } = globalThis.location): string {
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${loc.host}${path}`;
}
