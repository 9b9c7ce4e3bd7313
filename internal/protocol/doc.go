// Package protocol is the wire contract of PROTOCOL.md sections 4 and 5: the
// JSON frames a client sends and receives over WebSocket, the event objects
// that travel through NATS and out to clients unchanged, the HTTP error body,
// the Server-Sent Events framing and the WebSocket close codes.
//
// Decoding is strict because every client frame is untrusted: a frame either
// becomes a fully validated Request or a *task.Error with code invalid or
// too_large, never something half-checked. Encoding is the other way round:
// server messages are built from domain values and always come out as compact
// JSON without a raw newline, so a gateway may put several of them into one
// WebSocket frame separated by "\n".
package protocol
