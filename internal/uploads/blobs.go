package uploads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
)

// Blobs keeps the bytes of uploads; everything else about an upload is in
// Postgres (task.UploadStore). Dir, a local directory, is the default; S3,
// a bucket of an S3-compatible object store, serves several gateways (see
// docs/deploy.md, "Uploads storage").
//
// Runners never read blobs: what an engine needs of an attachment (its
// SHA-256 and, for a text file, its text) is kept in Postgres when the
// upload finishes.
type Blobs interface {
	// Create makes an empty blob for id (an existing one is emptied).
	Create(ctx context.Context, id string) error
	// Write stores what r yields at offset and returns how many bytes it
	// stored, also when it fails part way. Bytes at offset and after, left
	// by an earlier write that was never recorded, are replaced. A blob
	// shorter than offset is an error: its bytes were lost. A write behind
	// one made at a later offset comes from a request that lost the race
	// for the offset; S3 refuses it (conflict), Dir cannot tell.
	Write(ctx context.Context, id string, offset int64, r io.Reader) (int64, error)
	// Open reads a blob; a missing one is fs.ErrNotExist.
	Open(ctx context.Context, id string) (io.ReadSeekCloser, error)
	// Delete removes a blob; a missing one is not an error.
	Delete(ctx context.Context, id string) error
}

// Dir keeps each blob in a file of a local directory, <root>/<id[:2]>/<id>,
// written with fsync before Write returns, so the offset Postgres records
// never runs ahead of the bytes on disk.
type Dir struct {
	root string
}

var _ Blobs = (*Dir)(nil)

// NewDir uses (and creates) the directory root.
func NewDir(root string) (*Dir, error) {
	if root == "" {
		return nil, errors.New("uploads: no directory given")
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("uploads: create directory: %w", err)
	}
	return &Dir{root: root}, nil
}

// Root is the directory's path.
func (d *Dir) Root() string { return d.root }

// path names the file of id, which must be a canonical UUID: an id never
// reaches the file system unchecked.
func (d *Dir) path(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	return filepath.Join(d.root, id[:2], id), nil
}

// checkID accepts only a canonical UUID, so an id never reaches a file
// name or an object key unchecked.
func checkID(id string) error {
	u, err := uuid.Parse(id)
	if err != nil || len(id) != 36 || u.String() != id {
		return fmt.Errorf("uploads: %q is not an upload id", id)
	}
	return nil
}

func (d *Dir) Create(_ context.Context, id string) error {
	p, err := d.path(id)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("create blob %s: %w", id, err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("create blob %s: %w", id, err)
	}
	return f.Close()
}

func (d *Dir) Write(_ context.Context, id string, offset int64, r io.Reader) (n int64, err error) {
	p, err := d.path(id)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("write blob %s: %w", id, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write blob %s: %w", id, cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("write blob %s: %w", id, err)
	}
	if fi.Size() < offset {
		return 0, fmt.Errorf("write blob %s: it holds %d bytes, fewer than the offset %d", id, fi.Size(), offset)
	}
	if err := f.Truncate(offset); err != nil {
		return 0, fmt.Errorf("write blob %s: %w", id, err)
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, fmt.Errorf("write blob %s: %w", id, err)
	}
	n, err = io.Copy(f, r)
	if serr := f.Sync(); err == nil && serr != nil {
		// Nothing is known to be on disk: record none of it.
		return 0, fmt.Errorf("write blob %s: %w", id, serr)
	}
	if err != nil {
		return n, fmt.Errorf("write blob %s: %w", id, err)
	}
	return n, nil
}

func (d *Dir) Open(_ context.Context, id string) (io.ReadSeekCloser, error) {
	p, err := d.path(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fs.ErrNotExist, err)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", id, err)
	}
	return f, nil
}

func (d *Dir) Delete(_ context.Context, id string) error {
	p, err := d.path(id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %s: %w", id, err)
	}
	// The shard directory stays (there are at most 256): removing it could
	// race a Create in the same shard.
	return nil
}
