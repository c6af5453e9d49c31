// Package auth holds the server's named credentials and their roles
// (DESIGN.md §8 "Security"): who a bearer token belongs to, and what that
// role may do. The RPC API's interceptor and the status page both resolve a
// request's principal here, so that both compare tokens and apply roles the
// same way.
//
// Roles, from the issue that introduced them:
//   - reader: status, reads and queries;
//   - writer: reader, plus pushing records and creating collections (what an
//     application needs);
//   - operator: reader, plus compact, cancel, pause and resume, throttle,
//     verify;
//   - admin: everything, including deleting collections, settings and
//     rollback.
//
// writer and operator are not ordered: neither includes the other.
package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/compactorhq/compactor/internal/bearer"
	"github.com/compactorhq/compactor/internal/ctxval"
)

// Role is what a principal may do.
type Role string

// The roles.
const (
	RoleReader   Role = "reader"
	RoleWriter   Role = "writer"
	RoleOperator Role = "operator"
	RoleAdmin    Role = "admin"
)

// Roles are every role, in the order the documentation lists them.
var Roles = []Role{RoleReader, RoleWriter, RoleOperator, RoleAdmin}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool {
	switch r {
	case RoleReader, RoleWriter, RoleOperator, RoleAdmin:
		return true
	}
	return false
}

// Allows reports whether a principal of role r may call what needs role
// need: admin may do everything, every role may do what reader may, and
// writer and operator each what their own role may.
func (r Role) Allows(need Role) bool {
	switch {
	case !r.Valid() || !need.Valid():
		return false
	case r == RoleAdmin, need == RoleReader:
		return true
	}
	return r == need
}

// Principal is who makes a request: the name of a credential (or
// Anonymous) and its role.
type Principal struct {
	Name string
	Role Role
}

// Names of principals that are not in a tokens file.
const (
	// Anonymous is the principal of a request without a token: admin when
	// the server has no credentials at all, reader otherwise (allowed only
	// the reads, and only without --protect-reads).
	Anonymous = "anonymous"
	// TokenPrincipal is the name of the single --token's credential, which
	// is admin.
	TokenPrincipal = "admin"
)

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return ctxval.With(ctx, p)
}

// PrincipalFrom returns the principal ctx carries, and false when none.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	return ctxval.From[Principal](ctx)
}

// credential is one entry of a Credentials: a name, its role, and the
// SHA-256 of its token.
type credential struct {
	name string
	role Role
	sum  [sha256.Size]byte
}

// Credentials is an immutable set of named credentials. The zero value and
// nil hold none.
type Credentials struct {
	creds []credential
}

// Len is the number of credentials.
func (c *Credentials) Len() int {
	if c == nil {
		return 0
	}
	return len(c.creds)
}

// Names returns the credentials' names and roles, in file order.
func (c *Credentials) Names() []Principal {
	if c == nil {
		return nil
	}
	out := make([]Principal, len(c.creds))
	for i, cr := range c.creds {
		out[i] = Principal{Name: cr.name, Role: cr.role}
	}
	return out
}

// Lookup returns the principal whose token is presented. Every credential's
// hash is compared, in constant time, whatever matches, so the time taken
// says nothing about which credential (if any) matched or how much of a
// token was right.
func (c *Credentials) Lookup(presented string) (Principal, bool) {
	if c == nil {
		return Principal{}, false
	}
	p := sha256.Sum256([]byte(presented))
	found := -1
	for i := range c.creds {
		if subtle.ConstantTimeCompare(p[:], c.creds[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return Principal{Name: c.creds[found].name, Role: c.creds[found].role}, true
}

// sessionKey returns the key a principal's page session is signed with:
// the SHA-256 of its token, which the server holds (not the token).
func (c *Credentials) sessionKey(name string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	for _, cr := range c.creds {
		if cr.name == name {
			return cr.sum[:], true
		}
	}
	return nil, false
}

// SingleToken returns the credentials of the single --token: one principal
// named TokenPrincipal with role admin. Nil for "".
func SingleToken(token string) *Credentials {
	if token == "" {
		return nil
	}
	return &Credentials{creds: []credential{{name: TokenPrincipal, role: RoleAdmin, sum: sha256.Sum256([]byte(token))}}}
}

// Merge returns the credentials of a and b (a's first); a name in both is
// an error.
func Merge(a, b *Credentials) (*Credentials, error) {
	out := &Credentials{}
	seen := map[string]bool{}
	for _, c := range []*Credentials{a, b} {
		if c == nil {
			continue
		}
		for _, cr := range c.creds {
			if seen[cr.name] {
				return nil, fmt.Errorf("credential name %q is used twice (the single --token is named %q)", cr.name, TokenPrincipal)
			}
			seen[cr.name] = true
			out.creds = append(out.creds, cr)
		}
	}
	return out, nil
}

// Bounds of a tokens file.
const (
	maxFileBytes = 1 << 20 // bytes of a tokens file
	maxNameBytes = 128     // bytes of a credential's name
)

// ParseFile parses a tokens file: one credential per line, "name role
// sha256-hex-of-token" separated by spaces or tabs; blank lines and lines
// starting with "#" are ignored. A name is 1 to 128 bytes of letters,
// digits and "._-@"; a role one of Roles; the hash 64 hex digits (the
// output of `printf %s "$TOKEN" | sha256sum`). Names and hashes are unique,
// and the file holds at least one credential. Errors name the file's line
// and what is wrong, never a hash.
func ParseFile(r io.Reader) (*Credentials, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	out := &Credentials{}
	names := map[string]int{}
	sums := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxFileBytes)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want 3 fields \"name role sha256-hex-of-token\", got %d", line, len(fields))
		}
		name, role, hexSum := fields[0], Role(fields[1]), fields[2]
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if !role.Valid() {
			return nil, fmt.Errorf("line %d: credential %q: unknown role %q (want reader, writer, operator or admin)", line, name, truncate(string(role)))
		}
		var sum [sha256.Size]byte
		if len(hexSum) != 2*sha256.Size {
			return nil, fmt.Errorf("line %d: credential %q: the token's hash must be 64 hex digits (SHA-256), got %d characters", line, name, len(hexSum))
		}
		if _, err := hex.Decode(sum[:], []byte(hexSum)); err != nil {
			return nil, fmt.Errorf("line %d: credential %q: the token's hash is not hex", line, name)
		}
		if prev, ok := names[name]; ok {
			return nil, fmt.Errorf("line %d: credential %q is named on line %d already", line, name, prev)
		}
		if prev, ok := sums[sum]; ok {
			return nil, fmt.Errorf("line %d: credential %q has the same token as line %d", line, name, prev)
		}
		names[name], sums[sum] = line, line
		out.creds = append(out.creds, credential{name: name, role: role, sum: sum})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", line+1, err)
	}
	if len(out.creds) == 0 {
		// Without credentials every call is anonymous and admin: an
		// emptied file must not turn authentication off.
		return nil, errors.New("no credentials: a tokens file needs at least one line \"name role sha256-hex-of-token\" (without --tokens-file and --token the server runs without authentication)")
	}
	return out, nil
}

func checkName(name string) error {
	if len(name) > maxNameBytes {
		return fmt.Errorf("credential name is %d bytes, more than %d", len(name), maxNameBytes)
	}
	if name == Anonymous {
		return fmt.Errorf("credential name %q is reserved for requests without a token", Anonymous)
	}
	for _, r := range name {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-@", r)) || r == utf8.RuneError {
			return fmt.Errorf("credential name %q: only letters, digits and ._-@ are allowed", truncate(name))
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "…"
}

// LoadFile reads and parses the tokens file at path (ParseFile); errors
// name the path.
func LoadFile(path string) (*Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--tokens-file %s: %w", path, err)
	}
	defer f.Close()
	c, err := ParseFile(f)
	if err != nil {
		return nil, fmt.Errorf("--tokens-file %s: %w", path, err)
	}
	return c, nil
}

// Errors of Authenticator.Authenticate; they say what is wrong and never
// repeat the token.
var (
	ErrMissing = bearer.ErrMissing
	ErrInvalid = bearer.ErrInvalid
)

// Authenticator resolves requests to principals with credentials that may
// be replaced while it is used (a reload on SIGHUP). Safe for concurrent
// use. The zero value has no credentials.
type Authenticator struct {
	creds atomic.Pointer[Credentials]
}

// NewAuthenticator returns an Authenticator holding c (nil: none).
func NewAuthenticator(c *Credentials) *Authenticator {
	a := &Authenticator{}
	a.Set(c)
	return a
}

// Set replaces the credentials.
func (a *Authenticator) Set(c *Credentials) {
	if c == nil {
		c = &Credentials{}
	}
	a.creds.Store(c)
}

// Credentials returns the credentials in force.
func (a *Authenticator) Credentials() *Credentials {
	if a == nil {
		return nil
	}
	return a.creds.Load()
}

// Enabled reports whether any credential is configured: without one,
// every request is Anonymous with role admin.
func (a *Authenticator) Enabled() bool { return a.Credentials().Len() > 0 }

// Authenticate returns the principal of a request's Authorization header:
// with no credentials configured, Anonymous as admin; without a bearer
// token, Anonymous as reader and ErrMissing (the caller decides whether a
// reader without a token may go on); with a token that matches no
// credential, ErrInvalid.
func (a *Authenticator) Authenticate(h interface{ Get(string) string }) (Principal, error) {
	creds := a.Credentials()
	if creds.Len() == 0 {
		return Principal{Name: Anonymous, Role: RoleAdmin}, nil
	}
	tok, ok := bearer.FromHeaderValue(h.Get("Authorization"))
	if !ok {
		return Principal{Name: Anonymous, Role: RoleReader}, ErrMissing
	}
	p, ok := creds.Lookup(tok)
	if !ok {
		return Principal{}, ErrInvalid
	}
	return p, nil
}

// PermissionError says that a principal's role does not allow a call; its
// message names the role needed and the principal's.
type PermissionError struct {
	What      string // the procedure or action, e.g. "/compactor.v1.CollectionService/DeleteCollection"
	Need      Role
	Principal Principal
}

func (e *PermissionError) Error() string {
	need := string(e.Need) + " or admin"
	if e.Need == RoleAdmin {
		need = string(RoleAdmin)
	}
	return fmt.Sprintf("%s needs role %s; %s has role %s", e.What, need, e.Principal.Name, e.Principal.Role)
}

// ErrPermission matches every *PermissionError.
var ErrPermission = errors.New("permission denied")

// Is reports whether target is ErrPermission.
func (e *PermissionError) Is(target error) bool { return target == ErrPermission }

// Authorize returns a *PermissionError unless p's role allows need.
func Authorize(p Principal, need Role, what string) error {
	if p.Role.Allows(need) {
		return nil
	}
	return &PermissionError{What: what, Need: need, Principal: p}
}

// sessionLabel is what a page session's MAC signs, with the principal's
// name.
const sessionLabel = "compactor web session v2\x00"

// Session returns the value of the page's sign-in cookie for the principal
// named name: the name and a MAC of it keyed with the SHA-256 of the
// principal's token. It proves knowledge of the token without the token
// sitting in the browser (a stolen cookie does not open the RPC API),
// needs no server state, and stops working when the token is rotated or
// the credential removed. False when no credential has that name.
func (a *Authenticator) Session(name string) (string, bool) {
	key, ok := a.Credentials().sessionKey(name)
	if !ok {
		return "", false
	}
	return name + "." + sessionMAC(key, name), true
}

// SessionPrincipal returns the principal of a sign-in cookie's value made
// by Session, checking its MAC in constant time; false when it is not one
// of the credentials in force.
func (a *Authenticator) SessionPrincipal(value string) (Principal, bool) {
	i := strings.LastIndexByte(value, '.')
	if i <= 0 {
		return Principal{}, false
	}
	name, mac := value[:i], value[i+1:]
	creds := a.Credentials()
	key, ok := creds.sessionKey(name)
	if !ok {
		return Principal{}, false
	}
	if subtle.ConstantTimeCompare([]byte(mac), []byte(sessionMAC(key, name))) != 1 {
		return Principal{}, false
	}
	for _, p := range creds.Names() {
		if p.Name == name {
			return p, true
		}
	}
	return Principal{}, false
}

func sessionMAC(key []byte, name string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sessionLabel))
	m.Write([]byte(name))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Source says where the server's credentials come from: the single admin
// token (named TokenPrincipal), given itself (--token) or in a file
// (--token-file), and the named credentials of a tokens file
// (--tokens-file); any of them, or none.
type Source struct {
	Token      string
	TokenFile  string
	TokensFile string
}

// Load reads the credentials of s (the files again at each call). Errors
// name the file and, for a tokens file, the line.
func (s Source) Load() (*Credentials, error) {
	if s.TokenFile != "" {
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		if s.Token = strings.TrimSpace(string(b)); s.Token == "" {
			return nil, fmt.Errorf("--token-file %s is empty", s.TokenFile)
		}
	}
	var file *Credentials
	if s.TokensFile != "" {
		var err error
		if file, err = LoadFile(s.TokensFile); err != nil {
			return nil, err
		}
	}
	return Merge(SingleToken(s.Token), file)
}

// Reload loads s and puts its credentials in force. On error the
// credentials in force stay as they were, and the error (naming the file's
// line) is returned for the caller to log. The server calls it on SIGHUP.
func (a *Authenticator) Reload(s Source) error {
	c, err := s.Load()
	if err != nil {
		return err
	}
	a.Set(c)
	return nil
}
