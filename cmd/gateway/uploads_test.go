package main

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/tether-dev/tether/internal/uploads/s3test"
)

// TestRunWithS3: with TETHER_UPLOAD_S3_BUCKET the gateway keeps uploads in
// the bucket, with credentials from the usual AWS variables; a store that
// is down at start is logged and the gateway serves anyway.
func TestRunWithS3(t *testing.T) {
	// The AWS variables are the process's environment: no t.Parallel.
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	srv := s3test.Start(t)
	const secret = "a-test-secret-of-at-least-32-bytes!!"
	env := map[string]string{
		"TETHER_AUTH_SECRET":        secret,
		"TETHER_UPLOAD_S3_BUCKET":   s3test.Bucket,
		"TETHER_UPLOAD_S3_ENDPOINT": srv.Endpoint,
		"TETHER_UPLOAD_S3_PREFIX":   "files/",
	}
	base, stderr := startRun(t, env)
	if !strings.Contains(stderr.String(), "uploads stored in S3") {
		t.Errorf("the log does not say where uploads go:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), s3test.SecretKey) {
		t.Errorf("the secret key was logged:\n%s", stderr.String())
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ann",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, url string, h map[string]string, body []byte) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Tus-Resumable", "1.0.0")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	data := []byte("bytes that live in a bucket")
	resp := do("POST", base+"/v1/uploads/", map[string]string{"Upload-Length": strconv.Itoa(len(data)),
		"Upload-Metadata": "filename " + base64.StdEncoding.EncodeToString([]byte("a.txt"))}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	loc := resp.Header.Get("Location")
	resp = do("PATCH", base+loc, map[string]string{"Content-Type": "application/offset+octet-stream",
		"Upload-Offset": "0"}, data)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %d", resp.StatusCode)
	}
	id := loc[strings.LastIndex(loc, "/")+1:]
	if keys := srv.Keys("files/" + id + "/"); len(keys) == 0 {
		t.Fatalf("no objects under files/%s/ in the bucket", id)
	}

	// The store down at start: logged, and the gateway still serves.
	srv.Kill()
	base, stderr = startRun(t, env)
	if !strings.Contains(stderr.String(), "upload storage not reachable") {
		t.Errorf("the log does not say the bucket cannot be reached:\n%s", stderr.String())
	}
	resp, err = http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz with the store down: %v %v", err, resp)
	}
	resp.Body.Close()
}
