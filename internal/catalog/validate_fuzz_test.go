package catalog

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func FuzzValidateCollectionName(f *testing.F) {
	for _, s := range []string{"", " ", "debian", "with space", "tab\there", "nul\x00", "bidi\u202e", "zwj\u200d",
		"bad\xff", strings.Repeat("n", 256), strings.Repeat("n", 257), strings.Repeat("é", 128), "\u00a0", "日本語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateCollectionName(name)
		if err != nil {
			// The error never repeats the name (it may be huge or hostile).
			if len(name) > 3 && strings.Contains(err.Error(), name) {
				t.Fatalf("error %q repeats the name", err)
			}
			return
		}
		switch {
		case strings.TrimSpace(name) == "":
			t.Fatal("a blank name was accepted")
		case len(name) > 256:
			t.Fatalf("a %d-byte name was accepted", len(name))
		case !utf8.ValidString(name):
			t.Fatal("a name that is not UTF-8 was accepted")
		}
		for _, r := range name {
			if unicode.In(r, unicode.Cc, unicode.Cf) {
				t.Fatalf("a name with %U was accepted", r)
			}
		}
	})
}
