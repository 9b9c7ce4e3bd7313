package engine

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// textJoiner turns the JSON string values of successive content deltas into
// text, byte-exact even when a character is split between two chunks.
//
// encoding/json would turn each half of a split character into U+FFFD: a
// server that cuts a UTF-8 sequence between chunks sends raw invalid bytes,
// and one that cuts a surrogate pair sends "\ud83d" and "\ude00" apart.
// The joiner decodes the JSON string itself, keeping raw bytes as they are,
// and holds back an incomplete tail (a high surrogate, or the first bytes
// of a UTF-8 sequence) until the next chunk completes it. Whatever is still
// held at the end is released by Flush as it is; the runner makes the
// output valid UTF-8.
type textJoiner struct {
	tail      []byte // the start of a UTF-8 sequence the last chunk cut
	surrogate rune   // a high surrogate the last chunk ended with, or 0
}

var errBadJSONString = errors.New("malformed JSON string")

// Add decodes one JSON string literal (quotes included) and returns the
// text that is complete so far.
func (j *textJoiner) Add(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errBadJSONString
	}
	body := raw[1 : len(raw)-1]
	out := append(make([]byte, 0, len(j.tail)+len(body)), j.tail...)
	j.tail = nil
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			if j.surrogate != 0 {
				out, j.surrogate = utf8.AppendRune(out, utf8.RuneError), 0
			}
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(body) {
			return "", errBadJSONString
		}
		if body[i+1] == 'u' {
			if i+6 > len(body) {
				return "", errBadJSONString
			}
			v, err := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
			if err != nil {
				return "", errBadJSONString
			}
			out = j.appendUnit(out, rune(v))
			i += 6
			continue
		}
		if j.surrogate != 0 {
			out, j.surrogate = utf8.AppendRune(out, utf8.RuneError), 0
		}
		switch body[i+1] {
		case '"', '\\', '/':
			out = append(out, body[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			return "", errBadJSONString
		}
		i += 2
	}
	// Hold back the start of a UTF-8 sequence cut at the end of the chunk.
	for k := 1; k <= utf8.UTFMax-1 && k <= len(out); k++ {
		if b := out[len(out)-k]; b&0xC0 != 0x80 { // the last sequence's first byte
			if !utf8.FullRune(out[len(out)-k:]) {
				j.tail = append([]byte(nil), out[len(out)-k:]...)
				out = out[:len(out)-k]
			}
			break
		}
	}
	return string(out), nil
}

// appendUnit appends one UTF-16 code unit from a \u escape, pairing
// surrogates across escapes and across chunks.
func (j *textJoiner) appendUnit(out []byte, u rune) []byte {
	switch {
	case j.surrogate != 0 && u >= 0xDC00 && u <= 0xDFFF:
		r := utf16.DecodeRune(j.surrogate, u)
		j.surrogate = 0
		return utf8.AppendRune(out, r)
	case j.surrogate != 0:
		out, j.surrogate = utf8.AppendRune(out, utf8.RuneError), 0
	}
	if u >= 0xD800 && u <= 0xDBFF {
		j.surrogate = u
		return out
	}
	// A lone low surrogate is not a character: U+FFFD, as encoding/json does.
	return utf8.AppendRune(out, u)
}

// Flush returns what is still held back at the end of the stream.
func (j *textJoiner) Flush() string {
	out := j.tail
	if j.surrogate != 0 {
		out = utf8.AppendRune(out, utf8.RuneError)
	}
	j.tail, j.surrogate = nil, 0
	return string(out)
}
