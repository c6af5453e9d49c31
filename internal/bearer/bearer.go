// Package bearer is the one check of the server's bearer token, shared by
// the RPC API's authentication interceptor and the status page (DESIGN.md
// §8 "Security"), so that both parse the Authorization header and compare
// the token the same way.
package bearer

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// Errors of Token.CheckHeader; they say what is wrong and never repeat the
// token.
var (
	ErrMissing = errors.New("this call needs a bearer token: send the header Authorization: Bearer <token>")
	ErrInvalid = errors.New("invalid bearer token")
)

// Token is the configured token in the form it is compared in: its SHA-256,
// so that a comparison takes the same time whatever the presented token's
// length and content. The zero Token is "no token configured": it accepts
// nothing (callers decide whether a missing token means "open").
type Token struct {
	sum [sha256.Size]byte
	set bool
}

// New returns the Token for token; "" gives the zero Token.
func New(token string) Token {
	if token == "" {
		return Token{}
	}
	return Token{sum: sha256.Sum256([]byte(token)), set: true}
}

// Set reports whether a token is configured.
func (t Token) Set() bool { return t.set }

// Matches reports whether presented is the token, in constant time. False
// when no token is configured.
func (t Token) Matches(presented string) bool {
	p := sha256.Sum256([]byte(presented))
	return t.set && subtle.ConstantTimeCompare(p[:], t.sum[:]) == 1
}

// FromHeader returns the token of an "Authorization: Bearer <token>" header
// (the scheme is case-insensitive, RFC 9110 §11.1), or false when h has
// none.
func FromHeader(h http.Header) (string, bool) {
	return FromHeaderValue(h.Get("Authorization"))
}

// FromHeaderValue is FromHeader for the value of an Authorization header.
func FromHeaderValue(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// CheckHeader checks the bearer token of a request's headers: ErrMissing
// without one, ErrInvalid when it is not t (or no token is configured).
func (t Token) CheckHeader(h http.Header) error {
	tok, ok := FromHeader(h)
	if !ok {
		return ErrMissing
	}
	if !t.Matches(tok) {
		return ErrInvalid
	}
	return nil
}
