// Package s3test runs a real S3-compatible server for tests: versitygw
// (posix backend, a temporary directory) on 127.0.0.1, built from the
// module in ./server, whose go.mod and go.sum pin its version. The first
// build of a machine fetches and compiles it (about a minute); later ones
// come from Go's build cache, and the binary is kept in the user's cache
// directory under the hash of that go.sum.
package s3test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tether-dev/tether/internal/eventually"
	"github.com/tether-dev/tether/internal/syncbuffer"
	"github.com/tether-dev/tether/internal/uploads"
)

// Access key and secret of every test server: throwaway, 127.0.0.1 only.
const (
	AccessKey = "tether-test"
	SecretKey = "tether-test-secret"
	Bucket    = "tether"
)

// Server is one running versitygw with a bucket named Bucket.
type Server struct {
	t        testing.TB
	Endpoint string
	addr     string
	data     string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// Start runs a server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	data := t.TempDir()
	if err := os.Mkdir(filepath.Join(data, Bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, data: data}
	// versitygw cannot report a port it chose, so pick one below the
	// ephemeral range (32768 and up) and try another if it is taken.
	var err error
	for range 20 {
		port, _ := rand.Int(rand.Reader, big.NewInt(32000-20000))
		s.addr = fmt.Sprintf("127.0.0.1:%d", 20000+port.Int64())
		if err = s.start(bin); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("s3test: %v", err)
	}
	s.Endpoint = "http://" + s.addr
	t.Cleanup(s.Kill)
	return s
}

// start runs the binary on s.addr and waits until it answers HTTP.
func (s *Server) start(bin string) error {
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey,
		"--port", s.addr, "--quiet", "posix", s.data)
	out := &syncbuffer.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	err := eventually.Within(eventually.Deadline, "versitygw to answer on "+s.addr, func() (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("versitygw exited: %s", out.String())
		default:
		}
		resp, err := http.Get("http://" + s.addr + "/")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return true, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return err
	}
	s.cmd, s.exited = cmd, exited
	return nil
}

// Kill ends the server with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Restart runs the server again on the same address and data; a test
// fails if it cannot.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	// The port was the killed server's a moment ago; its sockets are
	// gone with the process, so it is free unless something else took it.
	if err := s.start(binary(s.t)); err != nil {
		s.t.Fatalf("s3test: restart: %v", err)
	}
}

// Config is an uploads.S3Config for this server.
func (s *Server) Config(prefix string) uploads.S3Config {
	return uploads.S3Config{Bucket: Bucket, Endpoint: s.Endpoint, Region: "us-east-1",
		Prefix: prefix, PathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")}
}

// Blobs is an uploads.S3 on this server.
func (s *Server) Blobs(prefix string) *uploads.S3 {
	s.t.Helper()
	b, err := uploads.NewS3(context.Background(), s.Config(prefix))
	if err != nil {
		s.t.Fatal(err)
	}
	return b
}

// Keys lists the keys under prefix in the bucket.
func (s *Server) Keys(prefix string) []string {
	s.t.Helper()
	cfg := s.Config("")
	c := s3.New(s3.Options{Region: cfg.Region, BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true, Credentials: cfg.Credentials})
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		s.t.Fatalf("s3test: list %s: %v", prefix, err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// binary builds versitygw once per test process, or finds it in the cache.
func binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("s3test: build versitygw: %v", buildErr)
	}
	return built
}

func build() (string, error) {
	_, self, _, _ := runtime.Caller(0)
	mod := filepath.Join(filepath.Dir(self), "server")
	sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(sum)
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "tether-s3test")
	bin := filepath.Join(dir, "versitygw-"+hex.EncodeToString(h[:8]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// The test processes of several packages start at once: one builds,
	// the others wait for it and use its binary.
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	// Built under a name of its own, then renamed, so a binary under the
	// final name is always whole.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// goTool is the go command of the toolchain running the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}
