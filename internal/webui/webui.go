// Package webui serves the browser client and chat UI, built from frontend/
// into dist/ by `make ui` and embedded in the gateway binary, so one binary
// serves everything on one origin.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed all:dist
var dist embed.FS

// files is dist/ with the prefix stripped.
var files = func() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("webui: embedded dist missing: " + err.Error())
	}
	return sub
}()

// Built reports whether the UI was built into the binary (dist/index.html exists).
func Built() bool { return built(files) }

func built(fsys fs.FS) bool {
	_, err := fs.Stat(fsys, "index.html")
	return err == nil
}

// notBuilt is the page served in place of the UI when the binary was built
// without it: a plain explanation instead of a 404 that looks like a bug.
const notBuilt = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tether: UI not built</title></head>
<body style="font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;line-height:1.5">
<h1>The Tether UI is not built</h1>
<p>This gateway was compiled without the browser UI. The API and WebSocket work as usual.</p>
<p>Run <code>make ui</code> and rebuild the gateway, or <code>make run</code>, which builds it.</p>
</body></html>
`

// Handler serves the UI: index.html at "/" (and for any path that is not a
// file, so a reload of a deep link still works), the hashed files under
// /assets/ with a year-long immutable cache, and index.html with no-cache so a
// new deployment is picked up at the next load.
func Handler() http.Handler { return handler(files) }

func handler(files fs.FS) http.Handler {
	if !built(files) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			if r.Method != http.MethodHead {
				_, _ = w.Write([]byte(notBuilt))
			}
		})
	}
	fileServer := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if strings.HasPrefix(name, "assets/") {
			if _, err := fs.Stat(files, name); err != nil {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			fileServer.ServeHTTP(w, r)
			return
		}
		if name != "" && name != "index.html" && name != ".keep" {
			if st, err := fs.Stat(files, name); err == nil && !st.IsDir() {
				w.Header().Set("Cache-Control", "no-cache")
				fileServer.ServeHTTP(w, r)
				return
			}
		}
		serveIndex(w, r, files)
	})
}

// serveIndex writes index.html directly: http.FileServer would redirect
// "/index.html" to "/" and cannot be told to answer other paths with it.
func serveIndex(w http.ResponseWriter, r *http.Request, files fs.FS) {
	body, err := fs.ReadFile(files, "index.html")
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
