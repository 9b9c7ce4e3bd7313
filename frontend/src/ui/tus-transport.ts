import type { DetailedError, Upload } from 'tus-js-client';
import type { TransportError, TransportOptions, UploadTransport } from '../lib';

/** tus-js-client is loaded the first time a file is attached (a chunk of its own). */
let tusModule: Promise<typeof import('tus-js-client')> | null = null;
const loadTus = () => {
  tusModule ??= import('tus-js-client');
  tusModule.catch(() => (tusModule = null));
  return tusModule;
};

/**
 * The upload manager's transport: tus-js-client, the tus protocol's own
 * client. Resuming is ours (the manager keeps the upload URL in
 * localStorage and the file in IndexedDB), so tus-js-client's own URL
 * storage is off; it resumes from the URL it is given (HEAD, then PATCH from
 * the offset the server reports) and creates a new upload if the server no
 * longer knows that one. The whole file goes in one PATCH: an interrupted
 * one keeps on the server what arrived.
 */
export const tusTransport: UploadTransport = {
  start(file, o) {
    let up: Upload | null = null;
    let aborted = false;
    loadTus().then(
      (tus) => {
        if (!aborted) up = begin(tus.Upload, file, o);
      },
      () => o.onError({ status: null, message: 'The uploader could not be loaded; retrying.' }),
    );
    return {
      abort: () => {
        aborted = true;
        void up?.abort(false).catch(() => undefined);
      },
    };
  },
  terminate: async (url) => {
    const tus = await loadTus();
    await tus.Upload.terminate(url, { retryDelays: [] });
  },
};

function begin(Tus: typeof Upload, file: Blob, o: TransportOptions): Upload {
  const up = new Tus(file, {
    endpoint: o.endpoint,
    uploadUrl: o.url,
    metadata: o.metadata,
    // Quick retries of a passing failure; the manager retries after these
    // with a longer backoff, for as long as the page is open.
    retryDelays: [0, 1000, 3000],
    storeFingerprintForResuming: false,
    removeFingerprintOnSuccess: false,
    onUploadUrlAvailable: () => {
      if (up.url) o.onUrl(up.url);
    },
    onProgress: (sent, total) => o.onProgress(sent, total),
    onSuccess: () => o.onSuccess(up.url ?? ''),
    onError: (err) => o.onError(transportError(err)),
  });
  up.start();
  return up;
}

/** The status and Tether's error message of a failed request. */
function transportError(err: Error | DetailedError): TransportError {
  const res = (err as DetailedError).originalResponse ?? null;
  if (!res) return { status: null, message: 'The network is unavailable; retrying.' };
  let message = '';
  try {
    const body = JSON.parse(res.getBody()) as { error?: { message?: string } };
    message = body.error?.message ?? '';
  } catch {
    /* not Tether's JSON */
  }
  return { status: res.getStatus(), message: message ? capitalize(message) + '.' : `The server answered ${res.getStatus()}.` };
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The server's upload size limit (tus discovery), or null if it does not say. */
export async function fetchMaxSize(endpoint: string): Promise<number | null> {
  try {
    const r = await fetch(endpoint, { method: 'OPTIONS', credentials: 'same-origin' });
    const n = Number.parseInt(r.headers.get('Tus-Max-Size') ?? '', 10);
    return Number.isSafeInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}
