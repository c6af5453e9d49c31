package web_test

import (
	"strings"
	"testing"

	"github.com/compactorhq/compactor/web"
)

func TestFooterShowsTheBuildOnEveryPage(t *testing.T) {
	e := newEnv(t, web.Config{Build: web.Build{
		Version: "v1.4.0", Revision: "3f2c9a1b7d4e5f60718293a4b5c6d7e8f9012345", Time: "2026-11-30T09:12:00Z", Modified: true,
	}})
	for _, path := range []string{"/", "/collections"} {
		r := e.get(path)
		wantStatus(t, r, 200)
		f := r.page(t).One(t, "build")
		text := strings.Join(strings.Fields(f.Text()), " ")
		if want := "compactor v1.4.0 · revision 3f2c9a1b7d4e (modified) · built 2026-11-30T09:12:00Z"; text != want {
			t.Errorf("%s: footer %q, want %q", path, text, want)
		}
	}

	// Without a build (the golden pages), no footer.
	if n := newEnv(t, web.Config{}).get("/").page(t).ByTestID("build"); len(n) != 0 {
		t.Errorf("footer without a build: %d elements", len(n))
	}
}
