package protocol

import "unicode/utf8"

// rawStringIsUTF8 reports whether a JSON string token (quotes included, as
// encoding/json validated it) denotes valid UTF-8 text: its raw bytes are
// UTF-8 and every \u escape of a UTF-16 surrogate is part of a proper
// high-low pair. encoding/json replaces both kinds of fault with U+FFFD
// without a word, which would store something the client never wrote.
func rawStringIsUTF8(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	// pendingHigh: the previous escape was a high surrogate that needs a low one next.
	pendingHigh := false
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			if pendingHigh {
				return false
			}
			continue
		}
		i++
		if i >= len(raw) {
			return false
		}
		if raw[i] != 'u' {
			if pendingHigh {
				return false
			}
			continue
		}
		if i+4 >= len(raw) {
			return false
		}
		r, ok := hex4(raw[i+1 : i+5])
		if !ok {
			return false
		}
		i += 4
		switch {
		case 0xD800 <= r && r <= 0xDBFF:
			if pendingHigh {
				return false
			}
			pendingHigh = true
		case 0xDC00 <= r && r <= 0xDFFF:
			if !pendingHigh {
				return false
			}
			pendingHigh = false
		default:
			if pendingHigh {
				return false
			}
		}
	}
	return !pendingHigh
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
