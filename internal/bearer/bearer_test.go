package bearer

import (
	"errors"
	"net/http"
	"testing"
)

func TestCheckHeader(t *testing.T) {
	tok := New("s3cret")
	for _, tt := range []struct {
		name, header string
		want         error
	}{
		{"the token", "Bearer s3cret", nil},
		{"any case of the scheme, spaces around", "  bearer   s3cret  ", nil},
		{"no header", "", ErrMissing},
		{"another scheme", "Basic s3cret", ErrMissing},
		{"the scheme alone", "Bearer ", ErrMissing},
		{"a wrong token", "Bearer s3cre", ErrInvalid},
		{"the token with a suffix", "Bearer s3cret2", ErrInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set("Authorization", tt.header)
			}
			if err := tok.CheckHeader(h); !errors.Is(err, tt.want) {
				t.Fatalf("CheckHeader(%q) = %v, want %v", tt.header, err, tt.want)
			}
		})
	}
}

func TestTheZeroTokenAcceptsNothing(t *testing.T) {
	var none Token
	if none.Set() || none.Matches("") || New("").Matches("") {
		t.Fatal("the zero token matched")
	}
	h := http.Header{"Authorization": {"Bearer x"}}
	if err := none.CheckHeader(h); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero token CheckHeader = %v, want ErrInvalid", err)
	}
}
