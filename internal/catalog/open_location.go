package catalog

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ParseLocation reads a catalog location as `compactor serve --catalog`
// takes it and returns the Config.Driver it selects:
//
//   - a URL whose scheme is postgres or postgresql
//     ("postgres://user@host:5432/db?sslmode=disable") is a PostgreSQL
//     catalog, opened through pgx; the URL must parse as a pgx connection
//     string (host, port, database, sslmode and the other libpq parameters);
//   - anything else is the path of a SQLite database file (an optional
//     "file:" prefix, as in "file:///var/lib/compactor/catalog.db", and "?"
//     query parameters are passed to the driver); any other scheme is an
//     error.
//
// Errors wrap ErrInvalidArgument and never repeat a password.
func ParseLocation(location string) (driver string, err error) {
	switch {
	case location == "":
		return "", fmt.Errorf("empty catalog location: %w", ErrInvalidArgument)
	case isPostgresURL(location):
		if _, err := pgconn.ParseConfig(location); err != nil {
			// pgx masks the password of the URL it quotes.
			return "", fmt.Errorf("PostgreSQL URL: %w: %w", ErrInvalidArgument, err)
		}
		return "postgres", nil
	case strings.Contains(location, "://") && !strings.HasPrefix(location, "file:"):
		scheme, _, _ := strings.Cut(location, "://")
		return "", fmt.Errorf("catalog URL scheme %q: want postgres:// or postgresql://, or the path of a SQLite file: %w", scheme, ErrInvalidArgument)
	}
	return "sqlite", nil
}

// isPostgresURL reports whether s is a postgres:// or postgresql:// URL
// (lower case, as pgx and libpq require).
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// RedactLocation returns location fit for logs and error messages: a
// URL's password is replaced by "xxxxx", and a "password" query parameter
// (which libpq also accepts) is dropped. A SQLite path is returned as is.
func RedactLocation(location string) string {
	if !strings.Contains(location, "://") {
		return location
	}
	u, err := url.Parse(location)
	if err != nil {
		return "(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
