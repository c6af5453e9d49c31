package server

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
)

type scrubCatalog struct {
	versions []catalog.Version
	before   time.Time
}

func (c *scrubCatalog) VersionsToScrub(_ context.Context, before time.Time, limit int) ([]catalog.Version, error) {
	c.before = before
	var out []catalog.Version
	for _, v := range c.versions {
		if v.CreatedAt.Before(before) && len(out) < limit {
			out = append(out, v)
		}
	}
	return out, nil
}

type scrubManager struct {
	queued map[string]jobtype.VerifyParams
}

func (m *scrubManager) Verify(_ context.Context, id string, p jobtype.VerifyParams, reason string) (manager.Enqueued, error) {
	if id == "gone" {
		return manager.Enqueued{}, &manager.NotFoundError{IDs: []string{id}}
	}
	if _, ok := m.queued[id]; ok {
		return manager.Enqueued{}, nil // the one queued already
	}
	m.queued[id] = p
	return manager.Enqueued{Created: true}, nil
}

// A pass queues one scrub verify job per collection for the versions
// verified more than the interval ago, skipping collections deleted
// meanwhile.
func TestScrubQueuesVerifyJobsForVersionsVerifiedLongestAgo(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-8 * 24 * time.Hour)
	cat := &scrubCatalog{versions: []catalog.Version{
		{CollectionID: "a", Version: 3, CreatedAt: old},
		{CollectionID: "a", Version: 4, CreatedAt: old},
		{CollectionID: "gone", Version: 1, CreatedAt: old},
		{CollectionID: "b", Version: 7, CreatedAt: old.Add(time.Hour)},
		{CollectionID: "c", Version: 1, CreatedAt: now.Add(-time.Hour)}, // verified recently
	}}
	mgr := &scrubManager{queued: map[string]jobtype.VerifyParams{}}
	s := &scrubber{cat: cat, mgr: mgr, cfg: DefaultScrubConfig(), now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler)}
	n, err := s.runOnce(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("runOnce: %d created, %v; want 2", n, err)
	}
	if !cat.before.Equal(now.Add(-7 * 24 * time.Hour)) {
		t.Errorf("asked for versions verified before %v, want a week ago", cat.before)
	}
	want := map[string]jobtype.VerifyParams{"a": {Version: 3, Scrub: true}, "b": {Version: 7, Scrub: true}}
	if len(mgr.queued) != 2 || mgr.queued["a"] != want["a"] || mgr.queued["b"] != want["b"] {
		t.Errorf("queued %v, want %v", mgr.queued, want)
	}
}

func TestScrubConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c  ScrubConfig
		ok bool
	}{
		{DefaultScrubConfig(), true},
		{ScrubConfig{}, true}, // off
		{ScrubConfig{Interval: time.Second}, false},
		{ScrubConfig{Interval: -time.Hour}, false},
		{ScrubConfig{Interval: time.Hour, MaxThroughput: -1}, false},
	} {
		if err := tc.c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok %v", tc.c, err, tc.ok)
		}
	}
}
