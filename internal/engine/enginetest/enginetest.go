// Package enginetest holds the demo engine's answers written out on their
// own, so tests compare what a tab, a row or a client ends with against the
// answer itself rather than against the engine's code.
//
// Tests only (see eventually.TestOnlyTestsImport).
package enginetest

import (
	"strconv"
	"strings"
)

// StreamText is the demo engine's exact answer to /stream n MS:
// "t1 t2 ... tn " (PROTOCOL.md section 6).
func StreamText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("t")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(" ")
	}
	return b.String()
}
