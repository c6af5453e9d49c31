package segment

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

// CrashFS exposes crashFS to the external tests of the package.
type CrashFS struct{ c *crashFS }

// OpenCrashBucket opens a file:// store over root whose Puts go through a
// crashFS, for tests that need the catalog (package segment_test may import
// it and the compactor).
func OpenCrashBucket(t testing.TB, root string) (Blobs, io.Closer, *CrashFS) {
	t.Helper()
	c := newCrashFS(root)
	b, closer, err := openBucketFS(context.Background(), "file://"+filepath.ToSlash(root), c)
	if err != nil {
		t.Fatal(err)
	}
	return b, closer, &CrashFS{c}
}

// Durable reports whether key would survive a power cut now with content.
func (c *CrashFS) Durable(key string) (content []byte, ok bool) { return c.c.durable(key) }
