package postgres

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tether-dev/tether/internal/task"
)

var _ task.UploadStore = (*Store)(nil)

// uploadColumns are the columns every upload query returns, in the order
// scanUpload reads them.
const uploadColumns = `id, user_id, name, type, size, received, finished_at IS NOT NULL,
	sha256, message_id, expires_at, created_at`

// errUploadNotFound is the answer for a missing upload, another user's and
// an expired one alike.
func errUploadNotFound() error { return task.Errorf(task.CodeNotFound, "upload not found") }

func scanUpload(row pgx.Row) (task.Upload, error) {
	var (
		u         task.Upload
		sum       []byte
		messageID *string
		expires   *time.Time
	)
	err := row.Scan(&u.ID, &u.UserID, &u.Name, &u.Type, &u.Size, &u.Offset, &u.Finished,
		&sum, &messageID, &expires, &u.CreatedAt)
	if err != nil {
		return task.Upload{}, err
	}
	u.SHA256 = hex.EncodeToString(sum)
	if messageID != nil {
		u.MessageID = *messageID
	}
	if expires != nil {
		u.ExpiresAt = expires.UTC()
	}
	u.CreatedAt = u.CreatedAt.UTC()
	return u, nil
}

// CreateUpload records a new upload of the user, before its first byte.
func (s *Store) CreateUpload(ctx context.Context, n task.NewUpload) (_ task.Upload, err error) {
	defer classify(&err)
	id, err := parseID("upload id", n.ID)
	if err != nil {
		return task.Upload{}, err
	}
	if err := checkUser(n.UserID); err != nil {
		return task.Upload{}, err
	}
	if err := task.CheckUploadName(n.Name); err != nil {
		return task.Upload{}, err
	}
	if n.Type == "" || len(n.Type) > task.MaxUploadTypeBytes || !isText(n.Type) {
		return task.Upload{}, task.Errorf(task.CodeInvalid, "file type must be 1..%d bytes of text", task.MaxUploadTypeBytes)
	}
	if n.Size < 0 {
		return task.Upload{}, task.Errorf(task.CodeInvalid, "size must not be negative")
	}
	now := s.now()
	u, err := scanUpload(s.pool.QueryRow(ctx, `
		INSERT INTO uploads (id, user_id, name, type, size, expires_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
		RETURNING `+uploadColumns,
		id, n.UserID, n.Name, n.Type, n.Size, n.ExpiresAt.UTC(), now))
	if err != nil {
		return task.Upload{}, fmt.Errorf("create upload %s: %w", id, err)
	}
	return u, nil
}

// Upload returns the user's upload. Another user's, a missing one and one
// that expired (even if not swept yet) answer alike: not_found.
func (s *Store) Upload(ctx context.Context, userID, uploadID string) (_ task.Upload, err error) {
	defer classify(&err)
	id, err := parseID("upload id", uploadID)
	if err != nil {
		// An id that is not ours is not found, not invalid: tus clients
		// treat 404 as "start a new upload".
		return task.Upload{}, errUploadNotFound()
	}
	if err := checkUser(userID); err != nil {
		return task.Upload{}, err
	}
	u, err := scanUpload(s.pool.QueryRow(ctx, `
		SELECT `+uploadColumns+` FROM uploads
		WHERE id = $1 AND user_id = $2 AND (expires_at IS NULL OR expires_at > $3)`,
		id, userID, s.now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Upload{}, errUploadNotFound()
	}
	if err != nil {
		return task.Upload{}, fmt.Errorf("read upload %s: %w", id, err)
	}
	return u, nil
}

// AdvanceUpload records stored bytes from..to. The condition on the stored
// offset makes two writers of one upload (two gateways, say) unable to both
// advance it: the second is refused with conflict.
func (s *Store) AdvanceUpload(ctx context.Context, uploadID string, from, to int64, expiresAt time.Time) (_ task.Upload, err error) {
	defer classify(&err)
	id, err := parseID("upload id", uploadID)
	if err != nil {
		return task.Upload{}, err
	}
	if to < from {
		return task.Upload{}, task.Errorf(task.CodeInvalid, "offset %d is before %d", to, from)
	}
	u, err := scanUpload(s.pool.QueryRow(ctx, `
		UPDATE uploads SET received = $3, updated_at = $4,
			expires_at = CASE WHEN message_id IS NULL THEN $5::timestamptz END
		WHERE id = $1 AND received = $2 AND finished_at IS NULL AND size >= $3
		RETURNING `+uploadColumns,
		id, from, to, s.now(), expiresAt.UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return task.Upload{}, task.Errorf(task.CodeConflict, "upload %s is not at offset %d", id, from)
	}
	if err != nil {
		return task.Upload{}, fmt.Errorf("advance upload %s to %d: %w", id, to, err)
	}
	return u, nil
}

// FinishUpload marks an upload whose every byte is stored as finished.
// Finishing a finished upload changes nothing.
func (s *Store) FinishUpload(ctx context.Context, uploadID, sha256 string, text *string) (_ task.Upload, err error) {
	defer classify(&err)
	id, err := parseID("upload id", uploadID)
	if err != nil {
		return task.Upload{}, err
	}
	sum, err := hex.DecodeString(sha256)
	if err != nil || len(sum) != 32 {
		return task.Upload{}, task.Errorf(task.CodeInvalid, "sha256 must be 64 hex digits")
	}
	if text != nil && (!isText(*text) || len(*text) > task.MaxTextAttachmentBytes) {
		return task.Upload{}, task.Errorf(task.CodeInvalid, "text must be UTF-8 of at most %d bytes", task.MaxTextAttachmentBytes)
	}
	now := s.now()
	u, err := scanUpload(s.pool.QueryRow(ctx, `
		UPDATE uploads SET finished_at = $4, sha256 = $2, text = $3, updated_at = $4
		WHERE id = $1 AND received = size AND finished_at IS NULL
		RETURNING `+uploadColumns, id, sum, text, now))
	if errors.Is(err, pgx.ErrNoRows) {
		u, err = scanUpload(s.pool.QueryRow(ctx, `SELECT `+uploadColumns+` FROM uploads WHERE id = $1`, id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return task.Upload{}, errUploadNotFound()
		case err == nil && !u.Finished:
			return task.Upload{}, task.Errorf(task.CodeConflict, "upload %s has %d of %d bytes", id, u.Offset, u.Size)
		}
	}
	if err != nil {
		return task.Upload{}, fmt.Errorf("finish upload %s: %w", id, err)
	}
	return u, nil
}

// DiscardUpload makes the user's unattached upload expire now; the sweep
// removes it with its bytes. An attached upload belongs to its message:
// conflict.
func (s *Store) DiscardUpload(ctx context.Context, userID, uploadID string) (err error) {
	defer classify(&err)
	u, err := s.Upload(ctx, userID, uploadID)
	if err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `
		UPDATE uploads SET expires_at = $2, updated_at = $2
		WHERE id = $1 AND message_id IS NULL`, u.ID, s.now())
	if err != nil {
		return fmt.Errorf("discard upload %s: %w", u.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return task.Errorf(task.CodeConflict, "upload is attached to a message; delete its conversation instead")
	}
	return nil
}

// SweepUploads removes expired uploads, oldest first. Each row stays locked
// while remove deletes its bytes, so a submit attaching it at that moment
// waits and then finds it gone (an expired upload cannot be attached
// anyway). Several processes may sweep at once: each skips the rows
// another has locked.
func (s *Store) SweepUploads(ctx context.Context, limit int, remove func(ctx context.Context, id string) error) (_ int, err error) {
	defer classify(&err)
	if limit < 1 {
		return 0, task.Errorf(task.CodeInvalid, "limit must be at least 1")
	}
	var (
		n         int
		removeErr error
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT id FROM uploads WHERE expires_at <= $1
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED`, s.now(), limit)
		if err != nil {
			return fmt.Errorf("find expired uploads: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("find expired uploads: %w", err)
		}
		var gone []string
		var errs []error
		for _, id := range ids {
			if err := remove(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("remove bytes of upload %s: %w", id, err))
				continue
			}
			gone = append(gone, id)
		}
		if len(gone) > 0 {
			tag, err := tx.Exec(ctx, `DELETE FROM uploads WHERE id = ANY($1)`, gone)
			if err != nil {
				return fmt.Errorf("delete expired uploads: %w", err)
			}
			n = int(tag.RowsAffected())
		}
		// The rows whose bytes could not be removed stay for the next round;
		// the others are committed either way.
		removeErr = errors.Join(errs...)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweep uploads: %w", err)
	}
	return n, removeErr
}
