package postgres

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/task"
)

// A cursor is a keyset position, (time, id), made opaque: it carries a kind
// (a history cursor is no conversations cursor) and an HMAC over the
// position, the kind and the scope it was issued for (the conversation, or
// the user), so a tampered or borrowed cursor is refused instead of read.
//
// Layout before base64url: kind (1) | unix microseconds (8) | id (16) | mac (16).

type cursorKind byte

const (
	cursorMessages      cursorKind = 'm'
	cursorConversations cursorKind = 'c'
	cursorSearch        cursorKind = 's'
)

const (
	cursorPayload = 1 + 8 + 16
	cursorMAC     = 16
)

// position is a keyset position: the row's time and id.
type position struct {
	At time.Time
	ID string
}

func (s *Store) encodeCursor(kind cursorKind, scope string, p position) string {
	id := uuid.MustParse(p.ID) // ids come from the database
	b := make([]byte, cursorPayload, cursorPayload+cursorMAC)
	b[0] = byte(kind)
	binary.BigEndian.PutUint64(b[1:9], uint64(p.At.UnixMicro()))
	copy(b[9:25], id[:])
	b = append(b, s.cursorMAC(b, scope)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor returns the position of a cursor, or ok false for "" (the
// newest page). Any other string that this store did not issue, for this
// kind and scope, is invalid.
func (s *Store) decodeCursor(kind cursorKind, scope, c string) (p position, ok bool, err error) {
	if c == "" {
		return position{}, false, nil
	}
	bad := task.Errorf(task.CodeInvalid, "invalid cursor")
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) != cursorPayload+cursorMAC || b[0] != byte(kind) {
		return position{}, false, bad
	}
	if !hmac.Equal(b[cursorPayload:], s.cursorMAC(b[:cursorPayload], scope)) {
		return position{}, false, bad
	}
	id, err := uuid.FromBytes(b[9:25])
	if err != nil {
		return position{}, false, bad
	}
	at := time.UnixMicro(int64(binary.BigEndian.Uint64(b[1:9]))).UTC()
	return position{At: at, ID: id.String()}, true, nil
}

func (s *Store) cursorMAC(payload []byte, scope string) []byte {
	m := hmac.New(sha256.New, s.cfg.CursorKey)
	m.Write(payload)
	m.Write([]byte(scope))
	return m.Sum(nil)[:cursorMAC]
}
