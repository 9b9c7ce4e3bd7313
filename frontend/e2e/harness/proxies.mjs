// TCP proxies between the browser and the gateway: one that holds WebSocket
// bytes, one that refuses WebSocket upgrades, one that slows the uplink.
// Each listens on a port of its own choosing (port 0) and reports it.
import { once } from 'node:events';
import net from 'node:net';
import { T } from './wait.mjs';

/**
 * A TCP proxy between the browser and the gateway that can hold what a
 * WebSocket connection sends, in either direction, until released: the way
 * to have a reload happen while a submit is still on its way (up) or its
 * answer is (down). HTTP connections pass untouched. Held bytes of a
 * connection the browser has closed are still delivered on release, as a
 * slow network would, and only then is the gateway side closed.
 */
export async function startHoldProxy(targetPort) {
  const conns = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const c = { client, upstream, ws: null, up: pipe(client, upstream), down: pipe(upstream, client), closed: once(upstream, 'close') };
    conns.add(c);
    const first = (b) => {
      c.ws = b.toString('latin1').startsWith('GET /v1/ws');
    };
    client.once('data', first);
    // Forgotten once both sides are closed: a held connection whose browser
    // side is gone stays until it is released.
    let closed = 0;
    const gone = () => {
      if (++closed === 2) conns.delete(c);
    };
    client.on('close', gone);
    upstream.on('close', () => {
      gone();
      client.destroy();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');

  function pipe(src, dst) {
    const p = { held: false, queue: [], srcEnded: false };
    p.endedP = new Promise((r) => (p.onEnd = r));
    src.on('data', (b) => {
      if (p.held) p.queue.push(b);
      else if (!dst.destroyed) dst.write(b);
    });
    const ended = () => {
      if (p.srcEnded) return;
      p.srcEnded = true;
      p.onEnd();
      if (!p.held) dst.end();
    };
    src.on('end', ended);
    src.on('close', ended);
    src.on('error', () => undefined);
    p.release = () => {
      p.held = false;
      for (const b of p.queue.splice(0)) if (!dst.destroyed) dst.write(b);
      if (p.srcEnded) dst.end();
    };
    return p;
  }

  return {
    port: server.address().port,
    /** Holds, from now on, what the open WebSocket connections send in that direction ('up': browser to gateway). */
    hold(direction) {
      let n = 0;
      for (const c of conns) {
        if (c.ws) {
          c[direction].held = true;
          n++;
        }
      }
      return n;
    },
    /** Lets the held bytes go; resolves once the gateway side of those connections has closed, if the browser side had. */
    async release(direction) {
      const waits = [];
      for (const c of conns) {
        if (!c[direction].held) continue;
        c[direction].release();
        if (c.up.srcEnded || c.down.srcEnded) waits.push(c.closed);
      }
      await Promise.all(waits);
    },
    /**
     * Delivers what the browser sent on held connections it has closed since
     * (a submit still on its way when the page went away), without the close
     * frame, and closes the gateway side only once the gateway has answered:
     * so the gateway handles the late message instead of dropping it with
     * the dying connection. Resolves with how many connections it delivered.
     */
    async deliverLate() {
      let n = 0;
      for (const c of [...conns]) {
        if (!c.up.held) continue;
        // The page is going away; its side closes soon.
        await Promise.race([c.up.endedP, new Promise((r) => setTimeout(r, T.short))]);
        if (!c.up.srcEnded) continue;
        const frames = wsFrames(Buffer.concat(c.up.queue.splice(0)));
        c.up.held = false;
        const answered = once(c.upstream, 'data');
        for (const f of frames) if (f.opcode !== 8) c.upstream.write(f.bytes);
        await Promise.race([answered, c.closed, new Promise((r) => setTimeout(r, T.short))]);
        c.upstream.end();
        await c.closed;
        n++;
      }
      return n;
    },
    /** Held connections (including ones the browser has closed since). */
    heldCount(direction) {
      return [...conns].filter((c) => c[direction].held).length;
    },
    async close() {
      for (const c of conns) {
        c.client.destroy();
        c.upstream.destroy();
      }
      server.close();
    },
  };
}

/** Splits client-to-server WebSocket bytes into frames (RFC 6455 section 5.2); a partial tail is one more item. */
function wsFrames(buf) {
  const frames = [];
  let i = 0;
  while (i + 2 <= buf.length) {
    const opcode = buf[i] & 0x0f;
    let len = buf[i + 1] & 0x7f;
    let head = 2;
    if (len === 126) {
      if (i + 4 > buf.length) break;
      len = buf.readUInt16BE(i + 2);
      head = 4;
    } else if (len === 127) {
      if (i + 10 > buf.length) break;
      len = Number(buf.readBigUInt64BE(i + 2));
      head = 10;
    }
    if (buf[i + 1] & 0x80) head += 4;
    const end = i + head + len;
    if (end > buf.length) break;
    frames.push({ opcode, bytes: buf.subarray(i, end) });
    i = end;
  }
  if (i < buf.length) frames.push({ opcode: -1, bytes: buf.subarray(i) });
  return frames;
}


/**
 * A TCP proxy to the gateway that refuses WebSocket upgrades (GET /v1/ws
 * answered 403 and closed), as some corporate proxies and networks do, and
 * passes everything else. unblock() lets upgrades through again; cut() drops
 * every open connection (an SSE stream breaks mid-answer).
 */
export async function startWsBlockingProxy(targetPort) {
  const conns = new Set();
  let blocking = true;
  let refused = 0;
  const server = net.createServer((client) => {
    client.once('data', (first) => {
      if (blocking && first.toString('latin1').startsWith('GET /v1/ws')) {
        refused++;
        client.end('HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      const upstream = net.connect(targetPort, '127.0.0.1');
      const c = { client, upstream };
      conns.add(c);
      upstream.write(first);
      client.pipe(upstream);
      upstream.pipe(client);
      const gone = () => {
        conns.delete(c);
        client.destroy();
        upstream.destroy();
      };
      client.on('close', gone);
      upstream.on('close', gone);
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
    });
    client.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    refused: () => refused,
    unblock() {
      blocking = false;
    },
    cut() {
      for (const c of [...conns]) {
        c.client.destroy();
        c.upstream.destroy();
      }
    },
    async close() {
      for (const c of [...conns]) {
        c.client.destroy();
        c.upstream.destroy();
      }
      server.close();
    },
  };
}


/**
 * A TCP proxy to the gateway that passes what the browser sends at most
 * upBytesPerSec (answers pass at full speed), so a multi-megabyte upload
 * takes long enough for a pause, a closed tab or a lost network to land in
 * the middle of it. When the browser closes a connection (a reload, an
 * abort, a closed tab), what the proxy still held for the gateway is lost,
 * as on a real network, and the gateway sees its request end early.
 * forwarded() counts the bytes that reached the gateway, which is how far an
 * upload really is (the browser counts what left it, and the proxy's
 * buffers run ahead of the gateway).
 */
export async function startThrottleProxy(targetPort, { upBytesPerSec }) {
  const conns = new Set();
  let forwarded = 0;
  const tickMs = 20;
  const perTick = Math.max(1, Math.floor((upBytesPerSec * tickMs) / 1000));
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    const queue = [];
    let queued = 0;
    let ended = false;
    const c = {
      destroy() {
        clearInterval(timer);
        client.destroy();
        upstream.destroy();
        conns.delete(c);
      },
    };
    conns.add(c);
    upstream.pipe(client);
    client.on('data', (b) => {
      queue.push(b);
      queued += b.length;
      if (queued > perTick * 8) client.pause();
    });
    const timer = setInterval(() => {
      let budget = perTick;
      while (budget > 0 && queue.length) {
        const b = queue[0];
        const n = Math.min(b.length, budget);
        upstream.write(n === b.length ? b : b.subarray(0, n));
        if (n === b.length) queue.shift();
        else queue[0] = b.subarray(n);
        forwarded += n;
        queued -= n;
        budget -= n;
      }
      if (queued <= perTick * 8) client.resume();
      if (ended && queue.length === 0) {
        clearInterval(timer);
        upstream.end();
      }
    }, tickMs);
    client.on('end', () => (ended = true));
    client.on('close', () => c.destroy());
    upstream.on('close', () => c.destroy());
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: server.address().port,
    /** Bytes passed on to the gateway so far. */
    forwarded: () => forwarded,
    /** Drops every open connection at once, as a network that goes away does. */
    cut() {
      for (const c of [...conns]) c.destroy();
    },
    async close() {
      for (const c of [...conns]) c.destroy();
      server.close();
    },
  };
}
