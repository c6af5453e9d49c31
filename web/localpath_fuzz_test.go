package web

import (
	"net/url"
	"strings"
	"testing"
)

func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"", "/", "/jobs/1?flash=x&partial=1#frag", "//evil.example", "/\\evil.example",
		"/%2F%2F ", "/%2F%2Fevil.example", "https://evil.example/", "/\t/evil", "/a b", "/%zz", "/?next=//x",
		"/..//evil", "/%5C%5Cevil", "///", "/@evil", "/:x", "/ja/%E6%97%A5"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://compactor.example/jobs/")
	f.Fuzz(func(t *testing.T, s string) {
		got := localPath(s)
		if again := localPath(got); again != got {
			t.Fatalf("localPath(%q) = %q, but localPath(%q) = %q", s, got, got, again)
		}
		if !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.ContainsAny(got, "\\\r\n\t") {
			t.Fatalf("localPath(%q) = %q is not a local path", s, got)
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
			t.Fatalf("localPath(%q) = %q parses as %+v, %v", s, got, u, err)
		}
		// A browser resolves the redirect against the page: it stays on
		// the site.
		if r := base.ResolveReference(u); r.Host != base.Host || r.Scheme != base.Scheme {
			t.Fatalf("localPath(%q) = %q leads to %s", s, got, r)
		}
		if q := u.Query(); q.Has("flash") || q.Has("partial") || q.Has("job") {
			t.Fatalf("localPath(%q) = %q keeps a dropped parameter", s, got)
		}
	})
}

func TestLocalPathIsIdempotentOnTheKnownCase(t *testing.T) {
	once := localPath("/%2F%2F ")
	if twice := localPath(once); twice != once {
		t.Fatalf("localPath(\"/%%2F%%2F \") = %q, then %q", once, twice)
	}
}
