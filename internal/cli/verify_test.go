package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/server"
)

// compactor verify --wait: exit 0 with a note saying what was checked for a
// sound version; exit 1 naming the blob when a block on disk is damaged.
func TestVerifyWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := startServer(t, func(c *server.Config) { c.DataDir = dir })
	id := createCollection(t, addr, "verified")
	file := jsonl(t, `{"id":"x","embedding":[1,2]}`, `{"id":"y","embedding":[3,4],"document":"d","metadata":{"k":"v"}}`)
	ok(t, addr, "push", "--collection", id, file)
	ok(t, addr, "compact", id, "--wait")

	r := ok(t, addr, "verify", id, "--replay", "--wait")
	if !strings.Contains(r.stdout, "SUCCEEDED") || !strings.Contains(r.stdout, "verified version 1") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	// The whole note: what was checked, and why the replay did not run
	// (the log before version 1 is purged).
	r = ok(t, addr, "-o", "json", "verify", id, "--replay", "--wait")
	for _, want := range []string{"JOB_STATE_SUCCEEDED", "verified version 1: 1 blocks", "2 records, digest ", "not replayed: log offsets (0, 2] are purged"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := ok(t, addr, "jobs", "--kind", "verify"); !strings.Contains(r.stdout, " VERIFY ") {
		t.Errorf("jobs --kind verify:\n%s", r.stdout)
	}
	fails(t, addr, nil, 1, "has no version 9", "verify", id, "--version", "9")
	fails(t, addr, nil, 2, "--version must not be negative", "verify", id, "--version", "-1")

	blocks, err := filepath.Glob(filepath.Join(dir, "blobs", "collections", id, "blocks", "*.parquet"))
	if err != nil || len(blocks) != 1 {
		t.Fatalf("blocks %v %v", blocks, err)
	}
	data, err := os.ReadFile(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(blocks[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	r = cli(t, addr, nil, "verify", id, "--wait")
	if r.code() != 1 || !strings.Contains(r.stderr, "verification failed") || !strings.Contains(r.stderr, filepath.Base(blocks[0])) {
		t.Fatalf("verify of a damaged block: exit %d\nstdout %s\nstderr %s", r.code(), r.stdout, r.stderr)
	}
}
