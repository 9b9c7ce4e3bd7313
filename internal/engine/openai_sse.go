package engine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxSSELine bounds one line of the event stream. A chat completion chunk
// is a few hundred bytes; a megabyte means the server is not speaking SSE.
const maxSSELine = 1 << 20

// errPartialLine: the stream ended in the middle of a line.
var errPartialLine = errors.New("event stream ended inside a line")

// sseReader reads the data of server-sent events as the WHATWG
// specification defines them, which is all a chat completions stream uses:
// lines end in \n, \r\n or \r; a line starting with ":" is a comment (a
// keep-alive); "data:" lines (one optional space after the colon) of one
// event are joined with \n; a blank line ends the event. Other fields
// (event, id, retry) are ignored. Reads may split lines anywhere, multi-byte
// characters included: bytes are only interpreted once a line is whole.
type sseReader struct {
	sc   *bufio.Scanner
	data []byte
	has  bool // a data field was seen in the current event
}

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	sc.Split(splitSSELines)
	return &sseReader{sc: sc}
}

// Next returns the data of the next event that has any. At the end of the
// stream it returns io.EOF if the stream ended cleanly after a complete
// line, errPartialLine if it was cut inside one, or the read error. An
// event whose blank line never came is dispatched at a clean end: its data
// lines were complete, so nothing was lost.
func (s *sseReader) Next() ([]byte, error) {
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if len(line) == 0 {
			if s.has {
				return s.take(), nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			value = nil
		}
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(name) != "data" {
			continue
		}
		if s.has {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.has = true
	}
	if err := s.sc.Err(); err != nil {
		return nil, err
	}
	if s.has {
		return s.take(), nil
	}
	return nil, io.EOF
}

func (s *sseReader) take() []byte {
	d := bytes.Clone(s.data)
	s.data, s.has = s.data[:0], false
	return d
}

// splitSSELines is a bufio.SplitFunc for the three line endings of SSE. A
// \r at the end of the buffer waits for more input, since a \n may follow.
// Unterminated bytes at the end of input are errPartialLine.
func splitSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return 0, nil, errPartialLine
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	default:
		return 0, nil, nil // a lone \r at the end: wait for a possible \n
	}
}
