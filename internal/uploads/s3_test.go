package uploads_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/tether-dev/tether/internal/uploads"
	"github.com/tether-dev/tether/internal/uploads/s3test"
)

// TestTwoGatewaysRaceOnS3: two services (two gateways) on one Postgres and
// one bucket get the same PATCH at the same offset at once, as when a
// client gives up on one and sends again through the other. Whatever
// each answers, HEAD then tells an offset from which the upload completes,
// and the bytes read back are the file's.
func TestTwoGatewaysRaceOnS3(t *testing.T) {
	t.Parallel()
	s3 := s3test.Start(t)
	a := setupOn(t, uploads.Config{MaxSize: 32 << 20}, s3.Blobs("uploads/"))
	svc, err := uploads.New(uploads.Config{MaxSize: 32 << 20}, a.store, s3.Blobs("uploads/"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.Serve(w, r, r.Header.Get(userHeader))
	}))
	t.Cleanup(srv.Close)
	b := &env{t: t, store: a.store, svc: svc, srv: srv}

	for round := range 3 {
		data := randomBytes(t, 17<<20+round)
		p := a.create("ann", "race.bin", len(data))
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, e := range []*env{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = e.patch("ann", p, 0, data).status
			}()
		}
		wg.Wait()
		t.Logf("round %d: the two PATCHes answered %v", round, statuses)
		for _, s := range statuses {
			if s != http.StatusNoContent && s != http.StatusConflict {
				t.Fatalf("round %d: PATCH answered %v", round, statuses)
			}
		}
		if off := b.offset("ann", p); off != len(data) {
			if r := b.patch("ann", p, off, data[off:]); r.status != http.StatusNoContent ||
				r.header.Get("Upload-Offset") != strconv.Itoa(len(data)) {
				t.Fatalf("round %d: finish from %d: %d %s", round, off, r.status, r.body)
			}
		}
		for _, e := range []*env{a, b} {
			if dl := e.do("GET", p, "ann", nil, nil); dl.status != http.StatusOK || sum(dl.body) != sum(data) {
				t.Fatalf("round %d: download: %d, %d bytes", round, dl.status, len(dl.body))
			}
		}
	}
}
