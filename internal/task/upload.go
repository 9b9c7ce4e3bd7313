package task

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of uploads and attachments (PROTOCOL.md section 10).
const (
	// MaxAttachments is how many uploads one message may carry.
	MaxAttachments = 10
	// MaxTextAttachmentBytes is the largest upload that counts as a text
	// file an engine reads (valid UTF-8 without NUL); larger ones are named.
	MaxTextAttachmentBytes = 256 << 10
	// MaxUploadNameBytes bounds a file name.
	MaxUploadNameBytes = 255
	// MaxUploadTypeBytes bounds a media type.
	MaxUploadTypeBytes = 255
	// DefaultUploadType is the type of an upload whose client named none.
	DefaultUploadType = "application/octet-stream"
)

// Attachment is an upload as a message shows it: the "attachments" entries
// of a user Message (PROTOCOL.md section 10).
type Attachment struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	Type string `json:"type"`
}

// Upload is a file sent with the tus protocol: what Postgres knows of it.
// Its bytes live in an upload store (internal/uploads).
type Upload struct {
	ID     string
	UserID string
	Name   string
	Type   string
	Size   int64
	// Offset is how many bytes are stored (tus Upload-Offset).
	Offset int64
	// Finished: every byte is in and SHA256 is known.
	Finished bool
	// SHA256 is the hex SHA-256 of the bytes, once finished.
	SHA256 string
	// MessageID is the user message it is attached to, "" while it is not.
	MessageID string
	// ExpiresAt is when an upload not attached to a message goes, with its
	// bytes; zero for an attached one, which lives as long as its message.
	ExpiresAt time.Time
	CreatedAt time.Time
}

// Attachment returns the upload as a message shows it.
func (u Upload) Attachment() Attachment {
	return Attachment{ID: u.ID, Name: u.Name, Size: u.Size, Type: u.Type}
}

// NewUpload asks to record an upload before its first byte.
type NewUpload struct {
	ID        string
	UserID    string
	Name      string
	Type      string
	Size      int64
	ExpiresAt time.Time
}

// AttachmentFile is an attachment as an engine reads it: the runner gets it
// from Postgres, never from the gateway's disk, so runners may run anywhere.
type AttachmentFile struct {
	Attachment
	// MessageID is the user message it belongs to.
	MessageID string
	// Own: attached to the task's own message (not an earlier one).
	Own bool
	// SHA256 is the hex SHA-256 of its bytes.
	SHA256 string
	// IsText: the file is valid UTF-8 without NUL of at most
	// MaxTextAttachmentBytes; Text holds it when the runner's text budget
	// allowed (see RunnerStore.Attachments).
	IsText bool
	Text   string
	// TextLoaded: Text holds the whole file.
	TextLoaded bool
}

// UploadStore is what the upload service needs of the source of truth.
// Every read is scoped to the user, and an expired upload is gone: another
// user's id, a missing one and an expired one all answer not_found.
type UploadStore interface {
	CreateUpload(ctx context.Context, u NewUpload) (Upload, error)
	Upload(ctx context.Context, userID, id string) (Upload, error)
	// AdvanceUpload records that the bytes from..to are stored; it applies
	// only while the stored offset is from (conflict otherwise), and moves
	// the expiry of an unattached upload to expiresAt.
	AdvanceUpload(ctx context.Context, id string, from, to int64, expiresAt time.Time) (Upload, error)
	// FinishUpload marks an upload whose every byte is stored as finished,
	// with its SHA-256 (hex) and, for a text file, its text.
	FinishUpload(ctx context.Context, id, sha256 string, text *string) (Upload, error)
	// DiscardUpload makes the user's upload expire now (tus termination); an
	// upload attached to a message is refused (conflict).
	DiscardUpload(ctx context.Context, userID, id string) error
	// SweepUploads removes up to limit expired uploads: for each, remove is
	// called (it deletes the bytes) while the row is locked, then the row
	// goes. It returns how many went.
	SweepUploads(ctx context.Context, limit int, remove func(ctx context.Context, id string) error) (int, error)
}

// CheckUploadName checks a file name: 1..MaxUploadNameBytes bytes of UTF-8,
// not "." or "..", with no path separator and no control character (C0,
// DEL, C1, and the bidirectional overrides that make a name read other
// than it is).
func CheckUploadName(name string) error {
	switch {
	case name == "":
		return Errorf(CodeInvalid, "file name: empty")
	case len(name) > MaxUploadNameBytes:
		return Errorf(CodeInvalid, "file name: longer than %d bytes", MaxUploadNameBytes)
	case !utf8.ValidString(name):
		return Errorf(CodeInvalid, "file name: not valid UTF-8")
	case name == "." || name == "..":
		return Errorf(CodeInvalid, "file name: %q is not a file name", name)
	case strings.ContainsAny(name, `/\`):
		return Errorf(CodeInvalid, "file name: contains a path separator (/ or \\)")
	}
	for _, r := range name {
		if unicode.IsControl(r) || bidiControl(r) {
			return Errorf(CodeInvalid, "file name: contains the control character %U", r)
		}
	}
	return nil
}

// bidiControl reports the embedding, override and isolate controls
// (U+202A..U+202E, U+2066..U+2069).
func bidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// CheckAttachments checks the ids a submit attaches: at most MaxAttachments,
// none twice. The ids are UUIDs already (the protocol checked them).
func CheckAttachments(ids []string) error {
	if len(ids) > MaxAttachments {
		return Errorf(CodeInvalid, "attachments: at most %d a message, got %d", MaxAttachments, len(ids))
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return Errorf(CodeInvalid, "attachments: upload %s is listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

// SameAttachments reports whether two submits attach the same uploads, in
// the same order: the attachments are part of a submit's identity.
func SameAttachments(a, b []string) bool { return slices.Equal(a, b) }
