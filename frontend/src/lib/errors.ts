import type { ErrorCode } from './protocol';

/** An `error` reply of the server: a code for programs, a message for people. */
export class TetherError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TetherError';
  }
}

/**
 * The request could not be answered because the connection is not open (or
 * closed before the reply). Requests that may wait for the connection never
 * see it; those made for immediate feedback do.
 */
export class NotConnectedError extends Error {
  constructor(message = 'not connected') {
    super(message);
    this.name = 'NotConnectedError';
  }
}
