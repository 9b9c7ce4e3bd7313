package protocol

// WebSocket close codes (RFC 6455 section 7.4) that Tether uses, and what each
// one means for a client. They are untyped so they convert to any WebSocket
// library's status type.
const (
	// CloseNormal: the exchange is over (for example the client went away cleanly).
	CloseNormal = 1000
	// CloseGoingAway: the endpoint is leaving (a browser navigating away).
	CloseGoingAway = 1001
	// CloseUnsupportedData: a binary frame arrived; Tether speaks text frames only.
	CloseUnsupportedData = 1003
	// CloseInvalidPayload: a text frame that is not valid UTF-8.
	CloseInvalidPayload = 1007
	// ClosePolicyViolation: the credentials expired or were revoked.
	ClosePolicyViolation = 1008
	// CloseMessageTooBig: a frame over MaxFrameBytes.
	CloseMessageTooBig = 1009
	// CloseServiceRestart: the gateway is shutting down; reconnect elsewhere.
	CloseServiceRestart = 1012
	// CloseTryAgainLater: the tab read too slowly and its queue filled up;
	// reconnect and take a fresh snapshot.
	CloseTryAgainLater = 1013
)

// MaxFrameBytes is the largest client frame a gateway reads; a bigger one
// closes the tab with CloseMessageTooBig.
const MaxFrameBytes = 64 << 10
