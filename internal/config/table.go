package config

import (
	"strings"
)

// Table is the README's configuration table: every setting with its flag,
// the components that use it, its default and its meaning, in declaration
// order. TestReadmeTable holds the README equal to it.
func Table() string {
	var b strings.Builder
	b.WriteString("| variable | flag | used by | default | meaning |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, s := range (&Config{}).settings() {
		b.WriteString("| `" + s.env + "` | `-" + s.flag + "` | " + s.users.String() + " | " +
			s.defaultDoc() + " | " + s.doc + " |\n")
	}
	return b.String()
}
