import { describeError } from './errortext';
import { NotConnectedError, TetherError } from './errors';

/** Something the user should be told once (a refused submit, a failed cancel). */
export interface Notice {
  level: 'info' | 'error';
  text: string;
  detail?: string | null;
}

/** A notice of what went wrong, the error said in plain words by its code and its detail kept. */
export function noticeOf(level: 'info' | 'error', text: string, err?: unknown): Notice {
  if (err === undefined) return { level, text, detail: null };
  const human =
    err instanceof TetherError
      ? describeError(err.code, err.message)
      : err instanceof NotConnectedError
        ? { text: 'The connection was lost; it will be tried again once it is back.', detail: err.message }
        : { text: 'Something went wrong.', detail: errText(err) };
  return { level, text: text ? `${text} ${human.text}` : human.text, detail: human.detail };
}

export function errText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
