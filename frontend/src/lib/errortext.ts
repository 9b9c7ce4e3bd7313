/**
 * What to tell a person about an error: a sentence in plain words, chosen by
 * the error's code, and the detail (the server's or the engine's own text)
 * for those who want it, shown behind a disclosure. Codes are PROTOCOL.md's
 * (section 4) and the task errors of section 2 (no_runner, runner_lost, or
 * the engine's message).
 */
export interface HumanError {
  text: string;
  /** The raw message, when it says more than text does; null otherwise. */
  detail: string | null;
}

const byCode: Record<string, string> = {
  invalid: 'The server could not accept this request.',
  unauthorized: 'Your session has ended. Reload the page to sign in again.',
  forbidden: 'This page is not allowed to do that.',
  not_found: 'That no longer exists. It may have been deleted in another tab.',
  conflict: 'This conflicts with something already sent.',
  rate_limited: 'Too many requests at once. Wait a moment and try again.',
  too_large: 'This is too large to send.',
  unavailable: 'The service is briefly unavailable. Try again in a moment.',
  internal: 'Something went wrong on the server. Try again.',
};

/** A refused request (submit, cancel, history, ...), by its error code. */
export function describeError(code: string, message: string | null | undefined): HumanError {
  const text = byCode[code] ?? 'Something went wrong. Try again.';
  return { text, detail: detailOf(message, code) };
}

/** A failed answer, by the task's error (section 2). */
export function describeTaskError(error: string | null | undefined): HumanError {
  switch (error) {
    case 'no_runner':
      return { text: 'No worker picked up this answer in time. Try again in a moment.', detail: error };
    case 'runner_lost':
      return { text: 'The workers answering this kept stopping, so it was given up. Try again.', detail: error };
    case null:
    case undefined:
    case '':
      return { text: 'The answer could not be finished. Try again.', detail: null };
    default:
      return { text: 'The assistant could not finish this answer. Try again.', detail: error };
  }
}

/** A message the composer refuses before sending (the limits of section 9). */
export function describeTooLong(bytes: number, limit: number): HumanError {
  const n = new Intl.NumberFormat('en');
  return { text: `This message is too long to send: ${n.format(bytes)} bytes, and the limit is ${n.format(limit)}. Shorten it or attach it as a file.`, detail: null };
}

function detailOf(message: string | null | undefined, code: string): string | null {
  const m = (message ?? '').trim();
  if (m === '' || m === code) return code;
  return `${m} (${code})`;
}
