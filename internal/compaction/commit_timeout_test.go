package compaction

import (
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
)

// TestCommitIsBoundedByTheConfiguredTimeout: the commit's deadline is
// --commit-timeout, not a constant. With a timeout too short for any commit
// the compaction fails as a transient error that names the flag, commits
// nothing and loses nothing; with the default one the same backlog commits.
// (A commit that purged 100,000 log rows on a busy machine used to exceed a
// hard-coded 30 s.)
func TestCommitIsBoundedByTheConfiguredTimeout(t *testing.T) {
	e := newEnv(t, envConfig{maxRecords: 100, batchRecords: 10, maxBlock: 8, minBlock: 2})
	for i := range 20 {
		e.push(materialize.OperationRecord{Op: materialize.OpAdd, ID: string(rune('a' + i)), Embedding: emb(float32(i))})
	}
	cfg := e.comp.cfg
	cfg.CommitTimeout = time.Nanosecond
	tight, err := New(e.cat, e.seg, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tight.Compact(e.ctx, e.id, Options{})
	if err == nil || !strings.Contains(err.Error(), "--commit-timeout 1ns") {
		t.Fatalf("compact with a 1ns commit timeout: err %v, want one naming --commit-timeout 1ns", err)
	}
	if !IsTransient(err) {
		t.Fatalf("a commit past its timeout is transient (retried, never dead-letters), got %v", err)
	}
	if c := e.coll(); c.SegmentVersion != 0 || c.CompactionOffset != 0 {
		t.Fatalf("after the failed commit: version %d, offset %d; want nothing committed", c.SegmentVersion, c.CompactionOffset)
	}
	e.check("after the commit past its timeout")
	if res := e.compact(); res.VersionAfter != 1 || res.OpRecordsRead != 20 {
		t.Fatalf("compact with the default timeout: version %d, %d records read; want 1 and 20", res.VersionAfter, res.OpRecordsRead)
	}
	e.check("after compacting with the default timeout")
}

func TestConfigValidateRejectsANonPositiveCommitTimeout(t *testing.T) {
	if d := DefaultConfig().CommitTimeout; d < 5*time.Minute {
		t.Fatalf("default commit timeout %s: want generous (minutes), a large commit on a busy machine takes tens of seconds", d)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		cfg := DefaultConfig()
		cfg.CommitTimeout = d
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--commit-timeout") {
			t.Fatalf("Validate with commit timeout %s: %v, want an error naming --commit-timeout", d, err)
		}
	}
}
