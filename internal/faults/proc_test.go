package faults

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one real process of the system under test: a gateway, a runner or
// a nats-server. Its stdout and stderr go, in order, to one log file under
// the test's directory and to memory, where waits look for lines. It can be
// killed, paused, resumed and started again with the same settings.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  *logSink

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run has exited
	exitErr error
	// expectExit is set before the harness ends the process on purpose, so an
	// exit without it is reported as a crash.
	expectExit bool
	starts     int
	onCrash    func(p *proc, err error)
}

// logSink keeps a process's output: appended to its file and kept in memory
// so tests can wait for a line.
type logSink struct {
	mu      sync.Mutex
	file    *os.File
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogSink(path string) (*logSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &logSink{file: f, changed: make(chan struct{})}, nil
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.file.Write(p)
	s.buf.Write(p)
	close(s.changed)
	s.changed = make(chan struct{})
	return len(p), nil
}

// note writes a harness line into the log, so a reader sees where the
// harness acted (killed, paused, restarted) among the process's own lines.
func (s *logSink) note(format string, args ...any) {
	line := fmt.Sprintf("=== faults %s: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	_, _ = s.Write([]byte(line))
}

// size is the current length of the output, an offset for waitFrom.
func (s *logSink) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

func (s *logSink) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// lines returns the lines written after offset that contain every one of subs.
func (s *logSink) lines(offset int, subs ...string) []string {
	var out []string
	for _, line := range strings.Split(s.text()[offset:], "\n") {
		ok := line != ""
		for _, sub := range subs {
			ok = ok && strings.Contains(line, sub)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// tail is the last n lines, for failure messages.
func (s *logSink) tail(n int) string {
	lines := strings.Split(strings.TrimRight(s.text(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFrom waits until a line after offset contains every one of subs, or
// the deadline passes.
func (s *logSink) waitFrom(offset int, timeout time.Duration, subs ...string) (string, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if l := s.lines(offset, subs...); len(l) > 0 {
			return l[0], nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return "", fmt.Errorf("no log line with %q within %v", subs, timeout)
		}
	}
}

func (s *logSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.file.Close()
}

// start runs the program (again, after an exit) with its settings.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("%s is still running (pid %d)", p.name, p.cmd.Process.Pid)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	// Its own process group: a Ctrl-C of go test does not reach it first, and
	// the harness ends it by pid in its cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.starts++
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.log.note("started %s (pid %d, run %d)", p.name, cmd.Process.Pid, p.starts)
	p.cmd, p.done, p.exitErr, p.expectExit = cmd, make(chan struct{}), nil, false
	done := p.done
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		expected := p.expectExit
		crash := p.onCrash
		p.mu.Unlock()
		p.log.note("%s (pid %d) exited: %v", p.name, cmd.Process.Pid, errOrZero(err))
		close(done)
		if !expected && crash != nil {
			crash(p, err)
		}
	}()
	return nil
}

func errOrZero(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pid is the current run's process id.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// running reports whether the current run has not exited.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// signal sends sig to the current run (by its pid).
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		p.expectExit = true
	}
	p.mu.Unlock()
	if cmd == nil || isClosed(done) {
		return fmt.Errorf("%s is not running", p.name)
	}
	p.log.note("sending %v to %s (pid %d)", sig, p.name, cmd.Process.Pid)
	return cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return p.waitExit(10 * time.Second)
}

func (p *proc) pause() error  { return p.signal(syscall.SIGSTOP) }
func (p *proc) resume() error { return p.signal(syscall.SIGCONT) }

// waitExit waits for the current run to exit.
func (p *proc) waitExit(timeout time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) did not exit within %v", p.name, p.pid(), timeout)
	}
}

// stop ends the process at the end of a test: resumed first in case it was
// paused, then killed. Only this process, by its pid.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	p.mu.Lock()
	p.expectExit = true
	cmd := p.cmd
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	_ = p.waitExit(10 * time.Second)
}

// exitError is the current run's exit, nil while it runs.
func (p *proc) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || !isClosed(p.done) {
		return nil
	}
	if p.exitErr == nil {
		return errors.New("exited with status 0")
	}
	return p.exitErr
}
