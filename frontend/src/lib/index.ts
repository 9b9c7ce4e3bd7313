/**
 * Tether's browser client library: framework-free, no runtime dependencies.
 * TetherClient is the whole thing; the rest is exported for apps that want
 * only a part (the connection, the subscriptions) and for tests.
 */
export { TetherClient, type ClientOptions, type ClientEvents, type ConversationView, type SearchState } from './client';
export { Connection, type ConnectionState, type ConnectionOptions, type ReplyHandler, type SendOptions } from './connection';
export { SharedConnection, browserSharing, type SocketLink, type LinkBus, type LinkElector, type SharedConnectionOptions } from './shared';
export { Interest, planRequest, followerStep, strictestLiveness, isLinkMessage, type LinkMessage, type RequestPlan, type FollowerStep } from './sharing';
export { Subscriptions, type SubscriptionState, type TaskSubscription, type SubscriptionEvents } from './subscription';
export { Backoff, backoffDelay, backoffCeiling, defaultBackoff, type BackoffOptions } from './backoff';
export { planReconnect, closeReason, type ReconnectPlan, type CloseInput } from './close';
export { decideRestore, clearsPointer, type RestoreAction, type Lookup, type PendingSubmit } from './restore';
export { applyStreamEvent, applySnapshot, eventAttempt, type Applied, type EventOutcome } from './stream';
export { utf8ByteLength, utf8Prefix } from './utf8';
export { parseFrame, type ParsedFrame } from './frame';
export { mergeNewest, mergeOlder, addLocal, localPair, type ChatMessage } from './history';
export { mergeFirstPage, mergeOlderPage, applyTask, applyConversationEvent, type ConversationItem } from './conversations';
export { titleFrom, titleRunes } from './titles';
export { dateGroup, groupByDate, messageTime, type DateGroup } from './dates';
export { apiRequest, browserFetch, type FetchLike } from './http';
export { buildMessages, keepUnchanged, messageKey, messageStatus, type TaskState, type ViewMessage } from './view';
export { Pointers, StorageKeys, type KeyValue, type ActivePointer } from './storage';
export { browserTabChannel, storageTabChannel, type TabChannel, type SyncMessage } from './tabsync';
export { browserPlatform, sameOriginWsUrl, type Platform, type SocketLike } from './platform';
export { TetherError, NotConnectedError } from './errors';
export {
  Uploads,
  uploadIdOf,
  parseDrafts,
  attachmentsOf,
  errorAction,
  finalRefusal,
  uploadErrorText,
  formatBytes,
  retryDelay,
  uploadsEndpoint,
  uploadsStorageKey,
  type DraftUpload,
  type DraftView,
  type UploadState,
  type UploadTransport,
  type TransportOptions,
  type TransportError,
  type TransportHandle,
  type FileVault,
  type Locks,
  type UploadPlatform,
  type UploadsOptions,
} from './uploads';
export { browserFileVault, memoryFileVault, browserLocks, browserUploadPlatform, listenDrafts } from './uploads-browser';
export { randomUUID } from './uuid';
export { parseRoute, conversationPath, startConversation, type Route } from './routes';
export { describeError, describeTaskError, describeTooLong, type HumanError } from './errortext';
export { draftSize, draftSizeLevel, draftSizeAnnouncement, warnShare, type DraftSize, type DraftSizeLevel } from './draftsize';
export { nextTheme, parseTheme, readTheme, saveTheme, themeLabel, themes, type Theme } from './theme';
export { nextAnnouncement, speakable, type Announcement } from './sentences';
export * from './protocol';
