import { CloseCode } from './protocol';

/** What to do after the socket closed or failed to open. */
export type ReconnectPlan =
  | { kind: 'stop'; reason: string }
  | { kind: 'offline'; reason: string }
  | { kind: 'now'; reason: string }
  | { kind: 'wait'; reason: string };

export interface CloseInput {
  /** The close code (1006 when the socket failed or the network dropped). */
  code: number;
  /** The client itself closed the socket on purpose (disconnect()). */
  byClient: boolean;
  /** navigator.onLine. */
  online: boolean;
  /** The delay-free retry was already used since the last healthy connection. */
  immediateUsed: boolean;
}

/**
 * Decides how a tab reconnects after a close. Every close the client did not
 * ask for leads to a reconnect: the server state is the truth and a fresh
 * snapshot loses nothing. 1012 (gateway restart) and 1013 (tab too slow) say
 * "come back now", so the first retry has no delay; any retry after that backs
 * off. Offline, waiting is pointless: the `online` event resumes it.
 */
export function planReconnect(c: CloseInput): ReconnectPlan {
  if (c.byClient) return { kind: 'stop', reason: 'closed by client' };
  if (!c.online) return { kind: 'offline', reason: 'browser is offline' };
  const reason = closeReason(c.code);
  if ((c.code === CloseCode.ServiceRestart || c.code === CloseCode.TryAgainLater) && !c.immediateUsed) {
    return { kind: 'now', reason };
  }
  return { kind: 'wait', reason };
}

/** A short human description of a close code, for the state's reason. */
export function closeReason(code: number): string {
  switch (code) {
    case CloseCode.Normal:
      return 'closed';
    case CloseCode.GoingAway:
      return 'server going away';
    case CloseCode.Abnormal:
      return 'connection lost';
    case CloseCode.PolicyViolation:
      return 'session expired';
    case CloseCode.MessageTooBig:
      return 'message too big';
    case CloseCode.ServiceRestart:
      return 'server restarting';
    case CloseCode.TryAgainLater:
      return 'server asked to reconnect';
    default:
      return `closed (${code})`;
  }
}
