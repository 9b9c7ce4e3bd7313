package uploads

import (
	"context"
	"errors"
	"io"
	"mime"
	"strings"

	"github.com/google/uuid"
	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/tether-dev/tether/internal/protocol"
	"github.com/tether-dev/tether/internal/task"
)

// dataStore is tusd's DataStore on Postgres (what is known of an upload)
// and Blobs (its bytes). Every lookup is scoped to the request's user.
type dataStore struct{ s *Service }

var (
	_ handler.DataStore           = dataStore{}
	_ handler.TerminaterDataStore = dataStore{}
)

// NewUpload records an upload before its first byte: its owner, its name
// and type from the Upload-Metadata (filename or name, filetype or type),
// and its size, which tusd has already checked against MaxSize.
func (d dataStore) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	if info.SizeIsDeferred {
		return nil, handler.ErrNotImplemented
	}
	name := metaFirst(info.MetaData, "filename", "name")
	if name == "" {
		return nil, tusError(d.s, task.Errorf(task.CodeInvalid,
			"Upload-Metadata must name the file (filename)"))
	}
	if err := task.CheckUploadName(name); err != nil {
		return nil, tusError(d.s, err)
	}
	typ, err := mediaType(metaFirst(info.MetaData, "filetype", "type"))
	if err != nil {
		return nil, tusError(d.s, err)
	}
	u, err := d.s.store.CreateUpload(ctx, task.NewUpload{
		ID: uuid.NewString(), UserID: userFrom(ctx), Name: name, Type: typ,
		Size: info.Size, ExpiresAt: d.s.expiry(),
	})
	if err != nil {
		return nil, tusError(d.s, err)
	}
	if err := d.s.blobs.Create(ctx, u.ID); err != nil {
		// The row expires unused and the sweep removes it.
		return nil, tusError(d.s, err)
	}
	return &upload{s: d.s, u: u}, nil
}

// GetUpload finds the user's upload; another user's, a missing and an
// expired one are all 404. An upload whose bytes are all in but that was
// never marked finished (its gateway stopped in between) is finished now.
func (d dataStore) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	u, err := d.s.store.Upload(ctx, userFrom(ctx), id)
	if err != nil {
		return nil, tusError(d.s, err)
	}
	if !u.Finished && u.Offset == u.Size {
		if u, err = d.s.finish(ctx, u); err != nil {
			return nil, tusError(d.s, err)
		}
	}
	return &upload{s: d.s, u: u}, nil
}

func (d dataStore) AsTerminatableUpload(up handler.Upload) handler.TerminatableUpload {
	return up.(*upload)
}

// upload is one upload as tusd handles it.
type upload struct {
	s *Service
	u task.Upload
}

func (up *upload) GetInfo(context.Context) (handler.FileInfo, error) {
	return handler.FileInfo{
		ID:       up.u.ID,
		Size:     up.u.Size,
		Offset:   up.u.Offset,
		MetaData: handler.MetaData{"filename": up.u.Name, "filetype": up.u.Type},
	}, nil
}

// WriteChunk stores a PATCH body at offset. It records the offset in
// Postgres after every segment, so the bytes of an interrupted request are
// kept up to where it stopped (tusd's body reader ends cleanly when the
// client goes away) and HEAD reports exactly what is stored.
func (up *upload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	if offset != up.u.Offset {
		return 0, handler.ErrMismatchOffset
	}
	var written int64
	for {
		at := offset + written
		n, werr := up.s.blobs.Write(ctx, up.u.ID, at, io.LimitReader(src, segment))
		if n > 0 {
			u, err := up.s.store.AdvanceUpload(ctx, up.u.ID, at, at+n, up.s.expiry())
			if err != nil {
				return written, tusError(up.s, err)
			}
			up.u = u
			written += n
		}
		if werr != nil {
			return written, tusError(up.s, werr)
		}
		if n < segment {
			return written, nil
		}
	}
}

func (up *upload) GetReader(ctx context.Context) (io.ReadCloser, error) {
	return up.s.blobs.Open(ctx, up.u.ID)
}

// FinishUpload is called by tusd once the offset reaches the size.
func (up *upload) FinishUpload(ctx context.Context) error {
	if up.u.Finished {
		return nil
	}
	u, err := up.s.finish(ctx, up.u)
	if err != nil {
		return tusError(up.s, err)
	}
	up.u = u
	return nil
}

// Terminate (tus DELETE) discards the user's upload: it is gone at once for
// every request, its bytes are deleted now, and the sweep removes its row.
// An upload attached to a message is refused (409).
func (up *upload) Terminate(ctx context.Context) error {
	if err := up.s.store.DiscardUpload(ctx, userFrom(ctx), up.u.ID); err != nil {
		return tusError(up.s, err)
	}
	if err := up.s.blobs.Delete(ctx, up.u.ID); err != nil {
		up.s.log.Warn("delete the bytes of a terminated upload; the sweep retries", "upload", up.u.ID, "err", err)
	}
	return nil
}

// metaFirst returns the first non-empty metadata value of keys.
func metaFirst(m handler.MetaData, keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(m[k]); v != "" {
			return v
		}
	}
	return ""
}

// mediaType checks and normalises a client's media type; none means
// application/octet-stream.
func mediaType(s string) (string, error) {
	if s == "" {
		return task.DefaultUploadType, nil
	}
	mt, params, err := mime.ParseMediaType(s)
	if err == nil && strings.Count(mt, "/") == 1 {
		if out := mime.FormatMediaType(mt, params); out != "" && len(out) <= task.MaxUploadTypeBytes {
			return out, nil
		}
	}
	return "", task.Errorf(task.CodeInvalid, "file type %q is not a media type such as text/plain", quoteShort(s))
}

func quoteShort(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// tusError turns an error of the store or the blobs into the tusd error
// that carries its HTTP status, with the code of PROTOCOL.md in front of the
// message ("not_found: upload not found"), which the response writer turns
// into Tether's JSON error body. Internal detail is logged, never sent.
func tusError(s *Service, err error) error {
	var te handler.Error
	if errors.As(err, &te) {
		return te
	}
	code := task.ErrorCode(err)
	if code == task.CodeInternal && !errors.Is(err, context.Canceled) {
		s.log.Error("upload", "err", err)
	}
	return handler.NewError(string(code), task.ErrorMessage(err), protocol.HTTPStatus(code))
}
