package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/tether-dev/tether/internal/fakeclock"
	"github.com/tether-dev/tether/internal/postgres"
	"github.com/tether-dev/tether/internal/task"
)

// newUpload records an upload of size bytes for user, expiring in a day.
func newUpload(t testing.TB, s *postgres.Store, c *fakeclock.Clock, user, name string, size int64) task.Upload {
	t.Helper()
	u, err := s.CreateUpload(context.Background(), task.NewUpload{ID: newID(), UserID: user,
		Name: name, Type: "text/plain", Size: size, ExpiresAt: c.Now().Add(24 * time.Hour)})
	if err != nil {
		t.Fatalf("create upload: %v", err)
	}
	return u
}

// finishedUpload records an upload holding text and finishes it.
func finishedUpload(t testing.TB, s *postgres.Store, c *fakeclock.Clock, user, name, text string) task.Upload {
	t.Helper()
	ctx := context.Background()
	u := newUpload(t, s, c, user, name, int64(len(text)))
	if _, err := s.AdvanceUpload(ctx, u.ID, 0, u.Size, c.Now().Add(24*time.Hour)); err != nil {
		t.Fatalf("advance: %v", err)
	}
	sum := sha256.Sum256([]byte(text))
	u, err := s.FinishUpload(ctx, u.ID, hex.EncodeToString(sum[:]), &text)
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	return u
}

func submitWith(s *postgres.Store, user, taskID, convID, content string, attachments ...string) (task.SubmitResult, error) {
	return s.Submit(context.Background(), task.SubmitRequest{UserID: user, TaskID: taskID,
		ConversationID: convID, Content: content, Attachments: attachments})
}

func TestUploadLifecycle(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	u := newUpload(t, s, c, "ann", "notes.txt", 10)
	if u.Offset != 0 || u.Finished || u.ExpiresAt.IsZero() {
		t.Fatalf("new upload: %+v", u)
	}
	got, err := s.Upload(ctx, "ann", strings.ToUpper(u.ID))
	if err != nil || got.ID != u.ID || got.Name != "notes.txt" || got.Size != 10 {
		t.Fatalf("read own upload: %+v %v", got, err)
	}
	// Another user's, a missing one and a malformed id answer alike.
	for _, tc := range []struct{ user, id string }{{"bob", u.ID}, {"ann", newID()}, {"ann", "../etc/passwd"}} {
		_, err := s.Upload(ctx, tc.user, tc.id)
		wantCode(t, err, task.CodeNotFound)
		if task.ErrorMessage(err) != "upload not found" {
			t.Fatalf("message %q", task.ErrorMessage(err))
		}
	}
	// The offset moves only from where it is.
	if _, err := s.AdvanceUpload(ctx, u.ID, 0, 4, c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, err = s.AdvanceUpload(ctx, u.ID, 0, 6, c.Now().Add(time.Hour))
	wantCode(t, err, task.CodeConflict)
	_, err = s.AdvanceUpload(ctx, u.ID, 4, 11, c.Now().Add(time.Hour))
	wantCode(t, err, task.CodeConflict) // past the size
	sum := sha256.Sum256([]byte("0123456789"))
	_, err = s.FinishUpload(ctx, u.ID, hex.EncodeToString(sum[:]), nil)
	wantCode(t, err, task.CodeConflict) // not every byte is in
	if _, err := s.AdvanceUpload(ctx, u.ID, 4, 10, c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	text := "0123456789"
	fin, err := s.FinishUpload(ctx, u.ID, hex.EncodeToString(sum[:]), &text)
	if err != nil || !fin.Finished || fin.SHA256 != hex.EncodeToString(sum[:]) || fin.Offset != 10 {
		t.Fatalf("finish: %+v %v", fin, err)
	}
	// Finishing twice changes nothing.
	if again, err := s.FinishUpload(ctx, u.ID, hex.EncodeToString(sum[:]), &text); err != nil || !again.Finished {
		t.Fatalf("finish again: %+v %v", again, err)
	}
}

func TestUploadNamesAreChecked(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	bad := []string{"", "a/b.txt", `a\b.txt`, "..", ".", "tab\there", "nul\x00", "del\x7f", "c1\u0085",
		"evil\u202Etxt.exe", strings.Repeat("x", 256), "bad\xffutf8"}
	for _, name := range bad {
		_, err := s.CreateUpload(context.Background(), task.NewUpload{ID: newID(), UserID: "ann",
			Name: name, Type: "text/plain", Size: 1, ExpiresAt: c.Now().Add(time.Hour)})
		wantCode(t, err, task.CodeInvalid)
	}
	for _, name := range []string{"report (final).pdf", "日本語.txt", "a b", strings.Repeat("é", 127), ".bashrc"} {
		newUpload(t, s, c, "ann", name, 1)
	}
	if n := count(t, s, `SELECT count(*) FROM uploads`); n != 5 {
		t.Fatalf("%d uploads stored, want the 5 good ones", n)
	}
}

func TestSubmitAttachments(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	a := finishedUpload(t, s, c, "ann", "a.txt", "alpha")
	b := finishedUpload(t, s, c, "ann", "b.txt", "beta")
	unfinished := newUpload(t, s, c, "ann", "half.bin", 100)
	foreign := finishedUpload(t, s, c, "bob", "bob.txt", "bob's")

	before := rowCounts(t, s)
	refused := []struct {
		name string
		ids  []string
	}{
		{"missing", []string{a.ID, newID()}},
		{"unfinished", []string{unfinished.ID}},
		{"foreign", []string{foreign.ID}},
		{"twice", []string{a.ID, strings.ToUpper(a.ID)}},
		{"not a uuid", []string{"nope"}},
		{"eleven", func() []string {
			ids := make([]string, 11)
			for i := range ids {
				ids[i] = newID()
			}
			return ids
		}()},
	}
	for _, tc := range refused {
		_, err := submitWith(s, "ann", newID(), newID(), "look", tc.ids...)
		if task.ErrorCode(err) != task.CodeInvalid {
			t.Fatalf("%s: %v, want invalid", tc.name, err)
		}
	}
	if after := rowCounts(t, s); after != before {
		t.Fatalf("refused submits wrote rows: %v -> %v", before, after)
	}
	if n := count(t, s, `SELECT count(*) FROM uploads WHERE message_id IS NOT NULL`); n != 0 {
		t.Fatalf("%d uploads attached by refused submits", n)
	}

	taskID, convID := newID(), newID()
	res, err := submitWith(s, "ann", taskID, convID, "look", b.ID, a.ID)
	if err != nil || !res.Created {
		t.Fatalf("submit with attachments: %+v %v", res, err)
	}
	// A repeat is a lookup; other attachments (or another order) are a conflict.
	if res, err := submitWith(s, "ann", taskID, convID, "look", b.ID, a.ID); err != nil || res.Created {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	for _, other := range [][]string{{a.ID, b.ID}, {a.ID}, nil} {
		_, err := submitWith(s, "ann", taskID, convID, "look", other...)
		wantCode(t, err, task.CodeConflict)
	}
	// An upload belongs to one conversation: another one cannot send it.
	_, err = submitWith(s, "ann", newID(), newID(), "again", a.ID)
	wantCode(t, err, task.CodeInvalid)

	msgs, _, err := s.History(ctx, "ann", convID, task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || len(msgs[0].Attachments) != 2 || msgs[1].Attachments == nil || len(msgs[1].Attachments) != 0 {
		t.Fatalf("history: %+v", msgs)
	}
	if got := msgs[0].Attachments; got[0] != b.Attachment() || got[1] != a.Attachment() {
		t.Fatalf("attachments in order: %+v", got)
	}
	// Attached uploads no longer expire.
	c.Advance(48 * time.Hour)
	if _, err := s.Upload(ctx, "ann", a.ID); err != nil {
		t.Fatalf("attached upload after two days: %v", err)
	}
}

func TestExpiredUploadsAreSweptAndCannotBeAttached(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	old := finishedUpload(t, s, c, "ann", "old.txt", "old")
	c.Advance(23 * time.Hour)
	fresh := finishedUpload(t, s, c, "ann", "fresh.txt", "fresh")
	c.Advance(2 * time.Hour) // old is 25h old: expired

	_, err := submitWith(s, "ann", newID(), newID(), "look", old.ID)
	wantCode(t, err, task.CodeInvalid)
	_, err = s.Upload(ctx, "ann", old.ID)
	wantCode(t, err, task.CodeNotFound)

	var removed []string
	n, err := s.SweepUploads(ctx, 10, func(_ context.Context, id string) error {
		removed = append(removed, id)
		return nil
	})
	if err != nil || n != 1 || len(removed) != 1 || removed[0] != old.ID {
		t.Fatalf("sweep: %d %v %v", n, removed, err)
	}
	if _, err := s.Upload(ctx, "ann", fresh.ID); err != nil {
		t.Fatalf("fresh upload swept: %v", err)
	}
	// Discard (tus termination) makes it go at the next sweep.
	if err := s.DiscardUpload(ctx, "bob", fresh.ID); task.ErrorCode(err) != task.CodeNotFound {
		t.Fatalf("discard of another user's upload: %v", err)
	}
	if err := s.DiscardUpload(ctx, "ann", fresh.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepUploads(ctx, 10, func(context.Context, string) error { return nil }); err != nil || n != 1 {
		t.Fatalf("sweep after discard: %d %v", n, err)
	}
	if n := count(t, s, `SELECT count(*) FROM uploads`); n != 0 {
		t.Fatalf("%d uploads left", n)
	}
}

func TestDeleteConversation(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	a := finishedUpload(t, s, c, "ann", "a.txt", "alpha")
	convID := newID()
	first, err := submitWith(s, "ann", newID(), convID, "one", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	claim(t, s, first.Task.ID) // still running when deleted
	submit(t, s, "ann", newID(), convID, "two")
	other := newTask(t, s, "ann")

	wantCode(t, s.DeleteConversation(ctx, "bob", convID), task.CodeNotFound)
	wantCode(t, s.DeleteConversation(ctx, "ann", newID()), task.CodeNotFound)
	if err := s.DeleteConversation(ctx, "ann", convID); err != nil {
		t.Fatal(err)
	}
	if got := rowCounts(t, s); got[0] != 1 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("rows after delete (conversations, messages, tasks, transitions): %v", got)
	}
	if _, err := s.Get(ctx, "ann", other.ID); err != nil {
		t.Fatalf("the other conversation's task: %v", err)
	}
	_, _, err = s.History(ctx, "ann", convID, task.Page{})
	wantCode(t, err, task.CodeNotFound)
	// Its upload is gone for every reader at once and swept with its bytes.
	_, err = s.Upload(ctx, "ann", a.ID)
	wantCode(t, err, task.CodeNotFound)
	var removed []string
	if _, err := s.SweepUploads(ctx, 10, func(_ context.Context, id string) error {
		removed = append(removed, id)
		return nil
	}); err != nil || len(removed) != 1 || removed[0] != a.ID {
		t.Fatalf("sweep: %v %v", removed, err)
	}
	// The runner that held the deleted task is fenced out.
	if _, err := s.Heartbeat(ctx, first.Task.ID, first.Task.Attempt); task.ErrorCode(err) != task.CodeNotFound {
		t.Fatalf("heartbeat of a deleted task: %v", err)
	}
	wantCode(t, s.DeleteConversation(ctx, "ann", convID), task.CodeNotFound)
}

func TestAttachmentsForTheRunner(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	convID := newID()
	early := finishedUpload(t, s, c, "ann", "early.txt", strings.Repeat("e", 100))
	if _, err := submitWith(s, "ann", newID(), convID, "first", early.ID); err != nil {
		t.Fatal(err)
	}
	big := newUpload(t, s, c, "ann", "photo.jpg", 3)
	if _, err := s.AdvanceUpload(ctx, big.ID, 0, 3, c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte{0xff, 0xd8, 0xff})
	if _, err := s.FinishUpload(ctx, big.ID, hex.EncodeToString(sum[:]), nil); err != nil {
		t.Fatal(err)
	}
	own := finishedUpload(t, s, c, "ann", "own.txt", strings.Repeat("o", 60))
	res, err := submitWith(s, "ann", newID(), convID, "second", own.ID, big.ID)
	if err != nil {
		t.Fatal(err)
	}

	files, err := s.Attachments(ctx, res.Task.ID, 200, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[0].ID != early.ID || files[1].ID != own.ID || files[2].ID != big.ID {
		t.Fatalf("order: %+v", files)
	}
	if files[0].Own || !files[1].Own || !files[2].Own {
		t.Fatalf("own flags: %+v", files)
	}
	if !files[1].IsText || !files[1].TextLoaded || files[1].Text != strings.Repeat("o", 60) {
		t.Fatalf("own text: %+v", files[1])
	}
	if files[2].IsText || files[2].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("binary file: %+v", files[2])
	}
	// A budget that holds only the newest text loads only that one.
	files, err = s.Attachments(ctx, res.Task.ID, 200, 99)
	if err != nil {
		t.Fatal(err)
	}
	if !files[1].TextLoaded || files[0].TextLoaded || !files[0].IsText {
		t.Fatalf("budget 99: %+v", files)
	}
	// A window of no earlier messages holds only the task's own.
	files, err = s.Attachments(ctx, res.Task.ID, 0, 1000)
	if err != nil || len(files) != 2 {
		t.Fatalf("own only: %+v %v", files, err)
	}
}

// A message may be its files alone (issue 24): empty content needs at least
// one attachment, and the submit's identity rules are the same as ever.
func TestFilesWithoutText(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	a := finishedUpload(t, s, c, "ann", "a.txt", "alpha")

	before := rowCounts(t, s)
	_, err := submitWith(s, "ann", newID(), newID(), "")
	wantCode(t, err, task.CodeInvalid)
	_, err = s.SubmitVersion(ctx, task.SubmitRequest{UserID: "ann", TaskID: newID(),
		ConversationID: newID(), Content: "", VersionOf: newID()})
	wantCode(t, err, task.CodeInvalid)
	if after := rowCounts(t, s); after != before {
		t.Fatalf("refused empty submits wrote rows: %v -> %v", before, after)
	}

	taskID, convID := newID(), newID()
	res, err := submitWith(s, "ann", taskID, convID, "", a.ID)
	if err != nil || !res.Created || res.Task.Input != "" {
		t.Fatalf("files without text: %+v %v", res, err)
	}
	// A repeat is a lookup; with text, or without the file, it is another submit.
	if res, err := submitWith(s, "ann", taskID, convID, "", a.ID); err != nil || res.Created {
		t.Fatalf("repeat: %+v %v", res, err)
	}
	_, err = submitWith(s, "ann", taskID, convID, "now with text", a.ID)
	wantCode(t, err, task.CodeConflict)
	_, err = submitWith(s, "ann", taskID, convID, "")
	wantCode(t, err, task.CodeInvalid)

	msgs, _, err := s.History(ctx, "ann", convID, task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Content != "" || len(msgs[0].Attachments) != 1 || msgs[0].Attachments[0] != a.Attachment() {
		t.Fatalf("history: %+v", msgs)
	}
	convs, _, err := s.Conversations(ctx, "ann", task.Page{})
	if err != nil || len(convs) != 1 || convs[0].Title != "a.txt" {
		t.Fatalf("a conversation that began with a file is called after it: %+v %v", convs, err)
	}
}

// A regenerated answer and an edited message send their turn's files again:
// the new user message holds the same uploads, which stay as long as the
// conversation does, whichever message goes first.
func TestVersionsSendTheSameFiles(t *testing.T) {
	t.Parallel()
	s, c := setup(t, postgres.Config{})
	ctx := context.Background()
	a := finishedUpload(t, s, c, "ann", "a.txt", "alpha")
	b := finishedUpload(t, s, c, "ann", "b.txt", "beta")
	convID, first := newID(), newID()
	if _, err := submitWith(s, "ann", first, convID, "", a.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	version := func(content string, ids ...string) task.SubmitResult {
		t.Helper()
		c.Advance(time.Second)
		res, err := s.SubmitVersion(ctx, task.SubmitRequest{UserID: "ann", TaskID: newID(),
			ConversationID: convID, Content: content, VersionOf: first, Attachments: ids})
		if err != nil || !res.Created {
			t.Fatalf("version %q: %+v %v", content, res, err)
		}
		return res
	}
	regen := version("", a.ID, b.ID)
	edit := version("now with words", b.ID)

	msgs, _, err := s.History(ctx, "ann", convID, task.Page{})
	if err != nil {
		t.Fatal(err)
	}
	var users []task.Message
	for _, m := range msgs {
		if m.Role == task.RoleUser {
			users = append(users, m)
		}
	}
	if len(users) != 3 || len(users[0].Attachments) != 2 || len(users[1].Attachments) != 2 ||
		len(users[2].Attachments) != 1 || users[2].Attachments[0] != b.Attachment() ||
		users[1].Attachments[0] != a.Attachment() || users[1].Attachments[1] != b.Attachment() {
		t.Fatalf("the versions' files: %+v", users)
	}
	// The engine reads each version's own files as its own.
	for _, v := range []struct {
		id   string
		want []string
	}{{regen.Task.ID, []string{a.ID, b.ID}}, {edit.Task.ID, []string{b.ID}}} {
		files, err := s.Attachments(ctx, v.id, 200, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var own []string
		for _, f := range files {
			if f.Own {
				own = append(own, f.ID)
			}
		}
		if strings.Join(own, ",") != strings.Join(v.want, ",") {
			t.Fatalf("own files of %s: %v, want %v (all: %+v)", v.id, own, v.want, files)
		}
	}
	// Held uploads never expire or get swept, and cannot be terminated.
	c.Advance(72 * time.Hour)
	if n, err := s.SweepUploads(ctx, 10, func(context.Context, string) error { return nil }); err != nil || n != 0 {
		t.Fatalf("sweep of held uploads: %d %v", n, err)
	}
	wantCode(t, s.DiscardUpload(ctx, "ann", b.ID), task.CodeConflict)
	// Another conversation cannot hold them.
	_, err = submitWith(s, "ann", newID(), newID(), "", a.ID)
	wantCode(t, err, task.CodeInvalid)
	// Deleting the conversation lets them go, with every message that held them.
	if err := s.DeleteConversation(ctx, "ann", convID); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepUploads(ctx, 10, func(context.Context, string) error { return nil }); err != nil || n != 2 {
		t.Fatalf("sweep after delete: %d %v", n, err)
	}
	if n := count(t, s, `SELECT count(*) FROM message_attachments`); n != 0 {
		t.Fatalf("%d message attachments left", n)
	}
}
