package protocol

// NormalizeUUID accepts a UUID in the textual form of RFC 4122 (32 hex digits
// as 8-4-4-4-12, either case) and returns it in lower case. Version and
// variant bits are not checked: clients make these ids and any well-formed
// one is unique enough to be theirs. Braces and the urn:uuid: prefix are
// refused so each id has exactly one spelling after normalisation.
func NormalizeUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	b := []byte(s)
	for i, c := range b {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
			continue
		}
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			b[i] = c + ('a' - 'A')
		default:
			return "", false
		}
	}
	return string(b), true
}
