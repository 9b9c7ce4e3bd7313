package uploads_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/uploads"
	"github.com/tether-dev/tether/internal/uploads/s3test"
)

// blobStores are the Blobs implementations, each made fresh for a test.
var blobStores = []struct {
	name string
	make func(t *testing.T) uploads.Blobs
}{
	{"dir", func(t *testing.T) uploads.Blobs {
		d, err := uploads.NewDir(filepath.Join(t.TempDir(), "uploads"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}},
	{"s3", func(t *testing.T) uploads.Blobs { return s3test.Start(t).Blobs("uploads/") }},
}

// TestBlobsContract holds every implementation to the doc comments of Blobs.
func TestBlobsContract(t *testing.T) {
	t.Parallel()
	for _, bs := range blobStores {
		t.Run(bs.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := bs.make(t)
			id := newID()
			read := func() string {
				t.Helper()
				f, err := b.Open(ctx, id)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer f.Close()
				got, err := io.ReadAll(f)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return string(got)
			}
			write := func(off int64, s string) {
				t.Helper()
				if n, err := b.Write(ctx, id, off, strings.NewReader(s)); err != nil || n != int64(len(s)) {
					t.Fatalf("write %q at %d: %d, %v", s, off, n, err)
				}
			}

			if _, err := b.Open(ctx, id); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open a missing blob: %v", err)
			}
			if err := b.Delete(ctx, id); err != nil {
				t.Fatalf("delete a missing blob: %v", err)
			}
			if err := b.Create(ctx, "../etc/passwd"); err == nil {
				t.Fatal("created a blob with a path for an id")
			}
			if err := b.Create(ctx, id); err != nil {
				t.Fatal(err)
			}
			if got := read(); got != "" {
				t.Fatalf("a new blob holds %q", got)
			}
			write(0, "hello world")
			write(5, "XYZ") // replaces what was at 5 and after
			if got := read(); got != "helloXYZ" {
				t.Fatalf("after a write at 5: %q", got)
			}
			if _, err := b.Write(ctx, id, 20, strings.NewReader("x")); err == nil {
				t.Fatal("a write past the end succeeded")
			}
			write(8, "!!")
			if got := read(); got != "helloXYZ!!" {
				t.Fatalf("after a write at the end: %q", got)
			}

			f, err := b.Open(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 3)
			for _, c := range []struct {
				off    int64
				whence int
				want   string
			}{{5, io.SeekStart, "XYZ"}, {-4, io.SeekCurrent, "oXY"}, {-2, io.SeekEnd, "!!"}, {0, io.SeekStart, "hel"}} {
				if _, err := f.Seek(c.off, c.whence); err != nil {
					t.Fatal(err)
				}
				n, err := io.ReadFull(f, buf[:len(c.want)])
				if err != nil || string(buf[:n]) != c.want {
					t.Fatalf("seek %d/%d: %q, %v; want %q", c.off, c.whence, buf[:n], err, c.want)
				}
			}
			if end, err := f.Seek(0, io.SeekEnd); err != nil || end != 10 {
				t.Fatalf("size by seek: %d, %v", end, err)
			}
			f.Close()

			if err := b.Create(ctx, id); err != nil {
				t.Fatal(err)
			}
			if got := read(); got != "" {
				t.Fatalf("create did not empty the blob: %q", got)
			}

			// More than a segment of S3's parts in one write, read back
			// across the parts' boundaries.
			big := randomBytes(t, 9<<20+333)
			if n, err := b.Write(ctx, id, 0, bytes.NewReader(big)); err != nil || n != int64(len(big)) {
				t.Fatalf("big write: %d, %v", n, err)
			}
			if got := read(); sum([]byte(got)) != sum(big) {
				t.Fatalf("big blob: %d bytes, sha256 %s", len(got), sum([]byte(got)))
			}

			if err := b.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Open(ctx, id); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open a deleted blob: %v", err)
			}
			if err := b.Delete(ctx, id); err != nil {
				t.Fatalf("delete twice: %v", err)
			}
		})
	}
}

// TestS3StaleWriteRefused: a write behind a part that starts later comes
// from a request that lost the race for the offset; it is refused as a
// conflict and the recorded bytes stay.
func TestS3StaleWriteRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := s3test.Start(t).Blobs("")
	id := newID()
	if err := b.Create(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		off int64
		s   string
	}{{0, "first "}, {6, "second"}} {
		if _, err := b.Write(ctx, id, w.off, strings.NewReader(w.s)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.Write(ctx, id, 0, strings.NewReader("stale"))
	if task.ErrorCode(err) != task.CodeConflict {
		t.Fatalf("stale write: %v", err)
	}
	f, err := b.Open(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); string(got) != "first second" {
		t.Fatalf("after a stale write: %q", got)
	}
}
