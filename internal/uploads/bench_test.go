package uploads_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/tether-dev/tether/internal/uploads"
)

// BenchmarkUpload measures one whole upload over HTTP on loopback: tus
// creation, one PATCH of the file (written to disk with fsync, its offset
// recorded in Postgres) and the finish (read back for its SHA-256). Compare
// its MB/s with `cp` of a file of the same size on the same disk.
func BenchmarkUpload(b *testing.B) {
	for _, size := range []int{1 << 20, 20 << 20} {
		b.Run(strconv.Itoa(size>>20)+"MiB", func(b *testing.B) {
			e := setup(b, uploads.Config{MaxSize: 32 << 20})
			data := randomBytes(b, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				p := e.create("ann", "bench.bin", size)
				if r := e.patch("ann", p, 0, data); r.status != http.StatusNoContent {
					b.Fatalf("PATCH: %d %s", r.status, r.body)
				}
			}
		})
	}
}
