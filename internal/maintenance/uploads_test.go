package maintenance_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tether-dev/tether/internal/task"
	"github.com/tether-dev/tether/internal/uploads"
)

// TestTickSweepsExpiredUploads: an upload nobody attached goes with its
// bytes once it expired; one attached to a message stays.
func TestTickSweepsExpiredUploads(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	dir, err := uploads.NewDir(filepath.Join(t.TempDir(), "uploads"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := uploads.New(uploads.Config{TTL: time.Hour, Now: e.clock.Now}, e.store, dir)
	if err != nil {
		t.Fatal(err)
	}
	e.loop.Uploads = svc
	put := func(name string) task.Upload {
		u, err := e.store.CreateUpload(ctx, task.NewUpload{ID: uuid.NewString(), UserID: "u", Name: name,
			Type: "text/plain", Size: 2, ExpiresAt: e.clock.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if err := dir.Create(ctx, u.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := dir.Write(ctx, u.ID, 0, strings.NewReader("hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.AdvanceUpload(ctx, u.ID, 0, 2, e.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if u, err = e.store.FinishUpload(ctx, u.ID, strings.Repeat("00", 32), nil); err != nil {
			t.Fatal(err)
		}
		return u
	}
	stale, kept := put("stale.txt"), put("kept.txt")
	if _, err := e.store.Submit(ctx, task.SubmitRequest{UserID: "u", TaskID: uuid.NewString(),
		ConversationID: uuid.NewString(), Content: "look", Attachments: []string{kept.ID}}); err != nil {
		t.Fatal(err)
	}
	file := func(id string) string { return filepath.Join(dir.Root(), id[:2], id) }

	e.loop.Tick(ctx)
	if _, err := os.Stat(file(stale.ID)); err != nil {
		t.Fatalf("swept before it expired: %v", err)
	}
	e.clock.Advance(61 * time.Minute)
	e.loop.Tick(ctx)
	if _, err := os.Stat(file(stale.ID)); !os.IsNotExist(err) {
		t.Fatalf("bytes of an expired upload: %v", err)
	}
	if _, err := e.store.Upload(ctx, "u", stale.ID); task.ErrorCode(err) != task.CodeNotFound {
		t.Fatalf("expired upload: %v", err)
	}
	if _, err := os.Stat(file(kept.ID)); err != nil {
		t.Fatalf("bytes of an attached upload: %v", err)
	}
}
