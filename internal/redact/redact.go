// Package redact keeps server file-system paths out of text that reaches
// clients (job errors over RPC and on the status page): a path tells an
// unauthenticated reader how the server's disks are laid out. The full text
// stays in the server log.
package redact

import (
	"path"
	"regexp"
)

// absPath matches an absolute path of two or more elements, optionally as a
// file:// URL: "/var/lib/compactor/blobs/x.parquet". It stops at white
// space, quotes, colons, commas, parentheses and brackets, which end a path
// in error text.
var absPath = regexp.MustCompile(`(?:file://)?(?:/[^/\s"'` + "`" + `:,()\[\]{}<>]+){2,}/?`)

// Paths replaces every absolute path in s with "…/" and its last element:
// "open /var/lib/compactor/blobs/b/1.parquet: no such file" becomes
// "open …/1.parquet: no such file".
func Paths(s string) string {
	return absPath.ReplaceAllStringFunc(s, func(p string) string {
		return "…/" + path.Base(p)
	})
}
