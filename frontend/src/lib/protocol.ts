/**
 * Wire types of Tether's protocol, version 1.1 (PROTOCOL.md), one to one with
 * the Go package internal/protocol and the domain types of internal/task.
 * Field names are the JSON names on the wire, so a decoded frame needs no
 * mapping layer.
 */

/** The state of a task (PROTOCOL.md section 3). */
export type TaskStatus = 'pending' | 'running' | 'done' | 'failed' | 'cancelled';

export const TASK_STATUSES: readonly TaskStatus[] = ['pending', 'running', 'done', 'failed', 'cancelled'];

/** No further event of the current attempt can follow. */
export function isTerminal(s: TaskStatus): boolean {
  return s === 'done' || s === 'failed' || s === 'cancelled';
}

/** The task still has work ahead. */
export function isActive(s: TaskStatus): boolean {
  return s === 'pending' || s === 'running';
}

/** Task object of PROTOCOL.md section 2. */
export interface Task {
  id: string;
  conversation_id: string;
  status: TaskStatus;
  attempt: number;
  /** Number of the last event applied to this snapshot (0 before any). */
  seq: number;
  /** 0..100, never decreasing within one attempt. */
  progress: number;
  input: string;
  /** The kept prefix of the current attempt (`keep` bytes), then its delta text up to `seq`. */
  output: string;
  /** `no_runner`, `runner_lost` or the engine's own message; set when failed. */
  error: string | null;
  result_ref: string | null;
  created_at: string;
  updated_at: string;
}

/** The Task carried by a `task` event: everything but the output. */
export type TaskInfo = Omit<Task, 'output'> & { output?: string };

export type Role = 'user' | 'assistant';

/** Status of an assistant message; null for user messages. */
export type MessageStatus = 'generating' | 'done' | 'failed' | 'cancelled';

/** An upload as a message carries it (PROTOCOL.md section 10). */
export interface Attachment {
  id: string;
  name: string;
  /** Bytes. */
  size: number;
  /** Media type, e.g. text/plain. */
  type: string;
}

/** Message object of PROTOCOL.md section 2. */
export interface Message {
  id: string;
  conversation_id: string;
  role: Role;
  content: string;
  task_id: string | null;
  status: MessageStatus | null;
  created_at: string;
  /** The uploads a user message carries, in order ([] for others; absent from an older server). */
  attachments?: Attachment[];
  /** The turn (task id) this message's turn follows; null for a first turn; absent from an older server (docs/protocol.md, "Versions"). */
  parent_task_id?: string | null;
}

/** Conversation object of PROTOCOL.md section 2. */
export interface Conversation {
  id: string;
  title: string;
  updated_at: string;
  /** A pending or running task of this conversation, else null. */
  active_task_id: string | null;
  /** Search results only: a few words of the newest message that matched ("" when the title did). */
  snippet?: string;
}

/** Opaque keyset cursor. */
export type Cursor = string;

export type ErrorCode =
  | 'invalid'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'rate_limited'
  | 'too_large'
  | 'unavailable'
  | 'internal';

// ---- client -> server -------------------------------------------------------

export interface SubmitRequest {
  type: 'submit';
  req?: string;
  task_id: string;
  conversation_id: string;
  content: string;
  /** Finished upload ids, in order; part of the submit's identity. */
  attachments?: string[];
  /** The turn the new one follows (when not the newest). */
  parent_task_id?: string;
  /** A turn the new one is another version of (a regenerate, an edit). */
  version_of?: string;
}
export interface SubscribeRequest {
  type: 'subscribe';
  req?: string;
  task_id: string;
}
export interface UnsubscribeRequest {
  type: 'unsubscribe';
  req?: string;
  task_id: string;
}
export interface CancelRequest {
  type: 'cancel';
  req?: string;
  task_id: string;
}
export interface HistoryRequest {
  type: 'history';
  req?: string;
  conversation_id: string;
  before?: Cursor;
  limit?: number;
}
export interface ConversationsRequest {
  type: 'conversations';
  req?: string;
  before?: Cursor;
  limit?: number;
  /** A search: conversations whose title or messages hold every word (docs/protocol.md). */
  q?: string;
}
export interface PingRequest {
  type: 'ping';
  req?: string;
}

export type ClientMessage =
  | SubmitRequest
  | SubscribeRequest
  | UnsubscribeRequest
  | CancelRequest
  | HistoryRequest
  | ConversationsRequest
  | PingRequest;

// ---- server -> client: replies ---------------------------------------------

export interface SubmittedReply {
  type: 'submitted';
  req?: string;
  /** True when this submit created the task; false for a repeat or a retry. */
  created: boolean;
  task: Task;
}
export interface SnapshotReply {
  type: 'snapshot';
  req?: string;
  task: Task;
}
export interface CancelledReply {
  type: 'cancelled';
  req?: string;
  task: Task;
}
export interface UnsubscribedReply {
  type: 'unsubscribed';
  req?: string;
  task_id: string;
}
export interface PongReply {
  type: 'pong';
  req?: string;
}
export interface HistoryReply {
  type: 'history';
  req?: string;
  /** Oldest first. */
  messages: Message[];
  /** Cursor of the page before this one, or null at the start. */
  next: Cursor | null;
}
export interface ConversationsReply {
  type: 'conversations';
  req?: string;
  /** Newest activity first. */
  conversations: Conversation[];
  next: Cursor | null;
}

// ---- server -> client: events ----------------------------------------------

/*
 * Stream events are ordered by (attempt, seq). Every event of protocol 1.1
 * carries `attempt`; a 1.0 server sent none on delta and progress events, and
 * the client counts such an event as one of the attempt it holds (see
 * eventAttempt in stream.ts), so the field is read defensively there.
 */
export interface DeltaEvent {
  type: 'delta';
  task_id: string;
  seq: number;
  attempt: number;
  text: string;
}
export interface ProgressEvent {
  type: 'progress';
  task_id: string;
  seq: number;
  attempt: number;
  progress: number;
  stage?: string;
}
export interface StatusEvent {
  type: 'status';
  task_id: string;
  seq: number;
  status: TaskStatus;
  attempt: number;
  error: string | null;
  result_ref: string | null;
  /**
   * On the first event of an attempt (status pending or running): how many
   * bytes (UTF-8) of the output the attempt kept from the lost one before it,
   * on a character boundary. Absent means 0: the output starts over.
   */
  keep?: number;
}
/** A task of this user was created or changed status (any tab or device). */
export interface TaskChangedEvent {
  type: 'task';
  task: TaskInfo;
}
/** A conversation of this user was renamed or deleted, in any tab or device (docs/protocol.md). */
export type ConversationChangedEvent =
  | { type: 'conversation'; action: 'renamed'; conversation: Conversation }
  | { type: 'conversation'; action: 'deleted'; conversation_id: string };

export interface ErrorReply {
  type: 'error';
  req?: string;
  code: ErrorCode;
  message: string;
}

/** A numbered event of one task's stream. */
export type StreamEvent = DeltaEvent | ProgressEvent | StatusEvent;

export type ServerMessage =
  | SubmittedReply
  | SnapshotReply
  | CancelledReply
  | UnsubscribedReply
  | PongReply
  | HistoryReply
  | ConversationsReply
  | StreamEvent
  | TaskChangedEvent
  | ConversationChangedEvent
  | ErrorReply;

/** WebSocket close codes Tether uses (internal/protocol/close.go). */
export const CloseCode = {
  Normal: 1000,
  GoingAway: 1001,
  UnsupportedData: 1003,
  /** No close frame at all: the network or the server went away. */
  Abnormal: 1006,
  InvalidPayload: 1007,
  /** Credentials expired or were revoked. */
  PolicyViolation: 1008,
  MessageTooBig: 1009,
  /** The gateway is shutting down: reconnect elsewhere, now. */
  ServiceRestart: 1012,
  /** This tab read too slowly: reconnect now and take a fresh snapshot. */
  TryAgainLater: 1013,
} as const;

/** Limits of PROTOCOL.md. */
export const Limits = {
  maxContentBytes: 32768,
  maxFrameBytes: 64 << 10,
  maxReqBytes: 64,
  defaultPage: 50,
  maxPage: 200,
  /** Attachments one message may carry. */
  maxAttachments: 10,
} as const;

/** Paths on the gateway's origin. */
export const Paths = {
  ws: '/v1/ws',
  tasks: '/v1/tasks',
  conversations: '/v1/conversations',
  /** The tus endpoint; an upload is /v1/uploads/{id} (GET downloads it). */
  uploads: '/v1/uploads/',
} as const;
