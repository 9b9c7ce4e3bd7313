import { NotConnectedError, TetherError } from './errors';
import type { ErrorCode } from './protocol';

/** The part of fetch the client uses (the browser's, or a fake in tests). */
export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** The browser's fetch on this origin, with the session cookie. */
export function browserFetch(): FetchLike {
  return (input, init) => fetch(input, { credentials: 'same-origin', cache: 'no-store', ...init });
}

/**
 * One JSON request to the gateway's HTTP API (PROTOCOL.md section 5). It
 * resolves with the decoded body (null for 204) and the status; an error
 * answer rejects with TetherError (its code and message from the body), and
 * a request that never got an answer (the network, an aborted request)
 * with NotConnectedError.
 */
export async function apiRequest(f: FetchLike, method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<{ status: number; body: unknown }> {
  let res: Response;
  try {
    res = await f(path, {
      method,
      signal,
      headers: body === undefined ? { Accept: 'application/json' } : { Accept: 'application/json', 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new NotConnectedError(err instanceof Error ? err.message : String(err));
  }
  if (res.status === 204) return { status: 204, body: null };
  let data: unknown = null;
  try {
    data = await res.json();
  } catch {
    if (res.ok) throw new TetherError('internal', `the server answered ${res.status} without JSON`);
  }
  if (!res.ok) {
    const e = (data as { error?: { code?: string; message?: string } } | null)?.error;
    // A proxy's 502/504 page is not the gateway's answer: as if the network failed.
    if (!e?.code && (res.status === 502 || res.status === 503 || res.status === 504)) throw new NotConnectedError(`the server answered ${res.status}`);
    throw new TetherError((e?.code ?? codeOf(res.status)) as ErrorCode, e?.message ?? `the server answered ${res.status}`);
  }
  return { status: res.status, body: data };
}

function codeOf(status: number): ErrorCode {
  switch (status) {
    case 400:
      return 'invalid';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 409:
      return 'conflict';
    case 413:
      return 'too_large';
    case 429:
      return 'rate_limited';
    case 503:
      return 'unavailable';
    default:
      return 'internal';
  }
}
