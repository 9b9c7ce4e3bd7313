package uploads_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tether-dev/tether/internal/uploads"
	"github.com/tether-dev/tether/internal/uploads/s3test"
)

// BenchmarkUpload measures one whole upload over HTTP on loopback: tus
// creation, one PATCH of the file (stored, its offset recorded in Postgres
// after each 8 MiB segment) and the finish (read back for its SHA-256), on
// a directory (written with fsync) and on S3 (versitygw on the same disk,
// over loopback). The cp sub-benchmark copies a file of the same size on
// the same disk, for comparison. Numbers: docs/deploy.md, "Uploads storage".
func BenchmarkUpload(b *testing.B) {
	for _, size := range []int{1 << 20, 20 << 20} {
		mib := strconv.Itoa(size>>20) + "MiB"
		data := randomBytes(b, size)
		b.Run("dir/"+mib, func(b *testing.B) {
			benchUpload(b, setup(b, uploads.Config{MaxSize: 32 << 20}), data)
		})
		b.Run("s3/"+mib, func(b *testing.B) {
			s3 := s3test.Start(b)
			benchUpload(b, setupOn(b, uploads.Config{MaxSize: 32 << 20}, s3.Blobs("uploads/")), data)
		})
		b.Run("cp/"+mib, func(b *testing.B) {
			dir := b.TempDir()
			src := filepath.Join(dir, "src")
			if err := os.WriteFile(src, data, 0o600); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := range b.N {
				if out, err := exec.Command("cp", src, filepath.Join(dir, strconv.Itoa(i))).CombinedOutput(); err != nil {
					b.Fatalf("cp: %v %s", err, out)
				}
			}
		})
	}
}

func benchUpload(b *testing.B, e *env, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		p := e.create("ann", "bench.bin", len(data))
		if r := e.patch("ann", p, 0, data); r.status != 204 {
			b.Fatalf("PATCH: %d %s", r.status, r.body)
		}
	}
}
