package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/tether-dev/tether/internal/task"
)

func file(id, msg, name string, own bool, text string, isText bool) task.AttachmentFile {
	f := task.AttachmentFile{Attachment: task.Attachment{ID: id, Name: name, Size: int64(len(text)), Type: "text/plain"},
		MessageID: msg, Own: own, SHA256: strings.Repeat("ab", 32), IsText: isText}
	if isText {
		f.Text, f.TextLoaded = text, true
	}
	return f
}

func TestDemoAttachments(t *testing.T) {
	t.Parallel()
	run := func(files []task.AttachmentFile, prefix string) string {
		t.Helper()
		fs := &fakeSleep{}
		r := &recorder{}
		err := (&Demo{Sleep: fs.sleep}).Run(context.Background(), Input{Content: "  /attachments \n", Attachments: files, Prefix: prefix}, r)
		if err != nil {
			t.Fatal(err)
		}
		if r.progress[len(r.progress)-1] != 100 {
			t.Fatalf("progress %v", r.progress)
		}
		return prefix + strings.Join(r.deltas, "")
	}
	if got := run(nil, ""); got != "no attachments" {
		t.Fatalf("none: %q", got)
	}
	files := []task.AttachmentFile{
		file("e", "m0", "earlier.txt", false, "old", true),
		file("a", "m1", "a b.txt", true, "hello", true),
		file("b", "m1", "photo.jpg", true, "\xff\xd8", false),
	}
	want := "a b.txt 5 " + strings.Repeat("ab", 32) + "\nphoto.jpg 2 " + strings.Repeat("ab", 32)
	if got := run(files, ""); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// A lost runner's answer continues at the next byte.
	if got := run(files, want[:12]); got != want {
		t.Fatalf("continued: %q", got)
	}
	// Only the exact directive: anything else is the quoted reply.
	r := &recorder{}
	if err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), Input{Content: "/attachments please", Attachments: files}, r); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.deltas, ""); !strings.HasPrefix(got, "Demo reply to") {
		t.Fatalf("not the directive: %q", got)
	}
	// Files without text get the directive's answer; without files of its
	// own, an empty message is the quoted reply as ever.
	for _, tc := range []struct {
		content string
		files   []task.AttachmentFile
		want    string
	}{
		{"", files, want},
		{" \n", files, want},
		{"", files[:1], `Demo reply to "": try /stream 20 100 or /fail 5 100.`},
	} {
		r := &recorder{}
		if err := (&Demo{Sleep: (&fakeSleep{}).sleep}).Run(context.Background(), Input{Content: tc.content, Attachments: tc.files}, r); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.deltas, ""); got != tc.want {
			t.Fatalf("%q with %d files: %q, want %q", tc.content, len(tc.files), got, tc.want)
		}
	}
}

func TestContextWithAttachments(t *testing.T) {
	t.Parallel()
	q1 := task.Message{ID: "m1", Role: task.RoleUser, Content: "q1"}
	hist := []task.Message{q1, answer("a1", "done")}
	files := []task.AttachmentFile{
		file("e", "m1", "old.txt", false, strings.Repeat("o", 400), true),
		file("a", "m9", "new.txt", true, strings.Repeat("n", 400), true),
		file("b", "m9", "photo.jpg", true, "\xff\xd8", false),
	}
	// Everything fits.
	msgs := buildMessages("", hist, "", "now", "", 10_000, files)
	if len(msgs) != 3 {
		t.Fatalf("messages: %s", roles(msgs))
	}
	if !strings.Contains(msgs[0].Content, strings.Repeat("o", 400)) || !strings.Contains(msgs[2].Content, strings.Repeat("n", 400)) {
		t.Fatalf("texts missing:\n%s", roles(msgs))
	}
	if !strings.Contains(msgs[2].Content, `[Attached file "photo.jpg" (text/plain, 2 bytes): not a text file, so not included]`) {
		t.Fatalf("binary file not named:\n%s", msgs[2].Content)
	}
	// Room for the newest text only: the older one is named, its exchange kept.
	msgs = buildMessages("", hist, "", "now", "", 150, files)
	if len(msgs) != 3 || strings.Contains(msgs[0].Content, strings.Repeat("o", 400)) ||
		!strings.Contains(msgs[0].Content, `"old.txt" (text/plain, 400 bytes): too long for the context, not included]`) ||
		!strings.Contains(msgs[2].Content, strings.Repeat("n", 400)) {
		t.Fatalf("budget 150:\n%s", roles(msgs))
	}
	// No room for any text: the current message still names its files.
	msgs = buildMessages("", hist, "", "now", "", 5, files)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, `"new.txt" (text/plain, 400 bytes): too long`) {
		t.Fatalf("budget 5:\n%s", roles(msgs))
	}
	// A text the runner did not load is named.
	notLoaded := file("c", "m9", "big.log", true, "", true)
	notLoaded.Size, notLoaded.TextLoaded = 200_000, false
	msgs = buildMessages("", nil, "", "now", "", 10_000, []task.AttachmentFile{notLoaded})
	if !strings.Contains(msgs[0].Content, `"big.log" (text/plain, 200000 bytes): too long`) {
		t.Fatalf("not loaded:\n%s", msgs[0].Content)
	}
}

// A message of files without text is its files: the model gets no empty
// user turn and no blank lines before them.
func TestContextOfFilesWithoutText(t *testing.T) {
	t.Parallel()
	files := []task.AttachmentFile{
		file("a", "m9", "new.txt", true, "hello", true),
		file("b", "m9", "photo.jpg", true, "\xff\xd8", false),
	}
	msgs := buildMessages("", nil, "", "", "", 1000, files)
	last := msgs[len(msgs)-1]
	want := "[Attached file \"new.txt\" (text/plain, 5 bytes) follows]\nhello\n[End of \"new.txt\"]\n\n" +
		"[Attached file \"photo.jpg\" (text/plain, 2 bytes): not a text file, so not included]"
	if last.Role != "user" || last.Content != want {
		t.Fatalf("current message: %+v\nwant %q", last, want)
	}
	if got := withNames("", files); !strings.HasPrefix(got, "[Attached file \"new.txt\"") {
		t.Fatalf("named: %q", got)
	}
}
