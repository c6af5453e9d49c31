// Package redact keeps server file-system paths out of text that reaches
// clients (job errors over RPC and on the status page): a path tells an
// unauthenticated reader how the server's disks are laid out. The full text
// stays in the server log.
package redact

import (
	"path"
	"regexp"
	"strings"
)

// absPath matches an absolute path of two or more elements, optionally as a
// file:// URL: "/var/lib/compactor/blobs/x.parquet". It stops at white
// space, quotes, colons, commas, parentheses and brackets, which end a path
// in error text.
//
// A relative path such as a blob key ("collections/c1/blocks/b.parquet") is
// matched whole, with its first element, so that it is left as it is.
var absPath = regexp.MustCompile(`(?:file://|[^/\s"'` + "`" + `:,()\[\]{}<>]*)(?:/[^/\s"'` + "`" + `:,()\[\]{}<>]+){2,}/?`)

// Paths replaces every absolute path in s with "…/" and its last element:
// "open /var/lib/compactor/blobs/b/1.parquet: no such file" becomes
// "open …/1.parquet: no such file".
func Paths(s string) string {
	return absPath.ReplaceAllStringFunc(s, func(p string) string {
		if !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "file://") {
			return p // relative: a blob key, not a server path
		}
		return "…/" + path.Base(p)
	})
}
