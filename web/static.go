package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"
)

//go:embed static
var staticFS embed.FS

// staticFiles serves the embedded CSS and script. Pages link them with a
// content hash (?v=…), so a matching request may be cached for good and a
// new build is fetched at once.
type staticFiles struct {
	files map[string]staticFile
}

type staticFile struct {
	body  []byte
	hash  string
	ctype string
}

func newStaticFiles() (*staticFiles, error) {
	s := &staticFiles{files: map[string]staticFile{}}
	entries, err := fs.ReadDir(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("read embedded static files: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(e.Name()))
		if ct == "" {
			ct = "application/octet-stream"
		}
		s.files[e.Name()] = staticFile{body: b, hash: hex.EncodeToString(sum[:6]), ctype: ct}
	}
	return s, nil
}

// url returns the versioned URL of an embedded file.
func (s *staticFiles) url(name string) string {
	return "/static/" + name + "?v=" + s.files[name].hash
}

func (s *staticFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files[r.PathValue("file")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.ctype)
	w.Header().Set("ETag", `"`+f.hash+`"`)
	if r.URL.Query().Get("v") == f.hash {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
