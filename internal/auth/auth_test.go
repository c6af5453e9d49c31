package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sum(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// TestRoleAllows: admin may do everything; every role what reader may;
// writer and operator only their own (neither includes the other).
func TestRoleAllows(t *testing.T) {
	want := map[Role][]Role{
		RoleReader:   {RoleReader},
		RoleWriter:   {RoleReader, RoleWriter},
		RoleOperator: {RoleReader, RoleOperator},
		RoleAdmin:    {RoleReader, RoleWriter, RoleOperator, RoleAdmin},
	}
	for _, r := range Roles {
		for _, need := range Roles {
			allowed := false
			for _, w := range want[r] {
				allowed = allowed || w == need
			}
			if got := r.Allows(need); got != allowed {
				t.Errorf("%s.Allows(%s) = %v, want %v", r, need, got, allowed)
			}
		}
	}
	if Role("root").Allows(RoleReader) || RoleAdmin.Allows(Role("")) {
		t.Error("an unknown role allows or is allowed")
	}
}

func TestParseFile(t *testing.T) {
	good := "# the team\n\nalice operator " + sum("a-token") + "\n\tapp-1\twriter\t" + strings.ToUpper(sum("b-token")) + "  \nbob@ops admin " + sum("c") + "\n"
	c, err := ParseFile(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Names(); len(got) != 3 || got[0] != (Principal{"alice", RoleOperator}) || got[1] != (Principal{"app-1", RoleWriter}) || got[2] != (Principal{"bob@ops", RoleAdmin}) {
		t.Fatalf("names: %+v", got)
	}
	for tok, want := range map[string]Principal{"a-token": {"alice", RoleOperator}, "b-token": {"app-1", RoleWriter}, "c": {"bob@ops", RoleAdmin}} {
		if p, ok := c.Lookup(tok); !ok || p != want {
			t.Errorf("Lookup(%q) = %+v, %v", tok, p, ok)
		}
	}
	for _, tok := range []string{"", "a-toke", "a-token ", sum("a-token")} {
		if p, ok := c.Lookup(tok); ok {
			t.Errorf("Lookup(%q) matched %+v", tok, p)
		}
	}

	for _, tt := range []struct{ name, file, want string }{
		{"two fields", "alice operator\n", "line 1: want 3 fields"},
		{"four fields", "# c\nalice operator " + sum("x") + " extra\n", "line 2: want 3 fields"},
		{"an unknown role", "alice root " + sum("x"), `line 1: credential "alice": unknown role "root"`},
		{"a short hash", "alice admin abc", `line 1: credential "alice": the token's hash must be 64 hex digits`},
		{"a hash not hex", "alice admin " + strings.Repeat("zz", 32), "the token's hash is not hex"},
		{"a bad name", "al/ice admin " + sum("x"), `credential name "al/ice"`},
		{"anonymous", "anonymous reader " + sum("x"), "reserved"},
		{"a name twice", "a reader " + sum("x") + "\na admin " + sum("y"), `line 2: credential "a" is named on line 1 already`},
		{"a token twice", "a reader " + sum("x") + "\nb admin " + sum("x"), `line 2: credential "b" has the same token as line 1`},
		{"an empty file", "", "no credentials"},
		{"comments only", "# nobody yet\n\n", "no credentials"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFile(strings.NewReader(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want …%s…", err, tt.want)
			}
			if strings.Contains(err.Error(), sum("x")) {
				t.Errorf("the error repeats a hash: %v", err)
			}
		})
	}
}

func header(v string) http.Header {
	h := http.Header{}
	if v != "" {
		h.Set("Authorization", v)
	}
	return h
}

// TestAuthenticateAndReload: without credentials everyone is anonymous
// admin; with them a token is its principal, none is anonymous reader
// (ErrMissing), a wrong one ErrInvalid; a reload with a bad file keeps the
// credentials in force and names the line; a good one replaces them.
func TestAuthenticateAndReload(t *testing.T) {
	a := NewAuthenticator(nil)
	if p, err := a.Authenticate(header("")); err != nil || p != (Principal{Anonymous, RoleAdmin}) {
		t.Fatalf("no credentials: %+v, %v", p, err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("alice operator " + sum("a") + "\n")
	src := Source{Token: "root-token", TokensFile: path}
	if err := a.Reload(src); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		header string
		want   Principal
		err    error
	}{
		{"Bearer a", Principal{"alice", RoleOperator}, nil},
		{"Bearer root-token", Principal{TokenPrincipal, RoleAdmin}, nil},
		{"", Principal{Anonymous, RoleReader}, ErrMissing},
		{"Bearer b", Principal{}, ErrInvalid},
	} {
		if p, err := a.Authenticate(header(tt.header)); p != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("%q: %+v, %v; want %+v, %v", tt.header, p, err, tt.want, tt.err)
		}
	}

	write("alice operator " + sum("a") + "\nbob boss " + sum("b") + "\n")
	err := a.Reload(src)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("reload of a bad file: %v", err)
	}
	if p, err := a.Authenticate(header("Bearer a")); err != nil || p.Name != "alice" {
		t.Fatalf("after a failed reload: %+v, %v", p, err)
	}

	write("bob reader " + sum("b") + "\n")
	if err := a.Reload(src); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(header("Bearer a")); !errors.Is(err, ErrInvalid) {
		t.Errorf("alice after she was removed: %v", err)
	}
	if p, err := a.Authenticate(header("Bearer b")); err != nil || p != (Principal{"bob", RoleReader}) {
		t.Errorf("bob: %+v, %v", p, err)
	}

	write("admin reader " + sum("b2") + "\n")
	if err := a.Reload(src); err == nil || !strings.Contains(err.Error(), `"admin" is used twice`) {
		t.Errorf("a file naming the single token's principal: %v", err)
	}
}

// TestSessions: a session names its principal, is refused once its token
// is rotated or its credential removed, and cannot be forged for another
// name.
func TestSessions(t *testing.T) {
	c1, _ := ParseFile(strings.NewReader("alice operator " + sum("a") + "\nbob reader " + sum("b")))
	a := NewAuthenticator(c1)
	s, ok := a.Session("alice")
	if !ok {
		t.Fatal("no session for alice")
	}
	if p, ok := a.SessionPrincipal(s); !ok || p != (Principal{"alice", RoleOperator}) {
		t.Fatalf("session: %+v, %v", p, ok)
	}
	_, mac, _ := strings.Cut(s, ".")
	for _, forged := range []string{"bob." + mac, "alice", "alice.", "." + mac, s + "x"} {
		if p, ok := a.SessionPrincipal(forged); ok {
			t.Errorf("forged session %q accepted as %+v", forged, p)
		}
	}
	c2, _ := ParseFile(strings.NewReader("alice operator " + sum("a2")))
	a.Set(c2)
	if _, ok := a.SessionPrincipal(s); ok {
		t.Error("a session survived the rotation of its token")
	}
}

// TestAuthorize names the role needed and the principal's.
func TestAuthorize(t *testing.T) {
	err := Authorize(Principal{"app", RoleWriter}, RoleAdmin, "DeleteCollection")
	if !errors.Is(err, ErrPermission) || err.Error() != "DeleteCollection needs role admin; app has role writer" {
		t.Errorf("%v", err)
	}
	err = Authorize(Principal{"app", RoleWriter}, RoleOperator, "Compact")
	if !errors.Is(err, ErrPermission) || err.Error() != "Compact needs role operator or admin; app has role writer" {
		t.Errorf("%v", err)
	}
	if err := Authorize(Principal{"op", RoleOperator}, RoleReader, "x"); err != nil {
		t.Fatal(err)
	}
}
