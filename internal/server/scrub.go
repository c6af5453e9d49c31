package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/jobtype"
	"github.com/compactorhq/compactor/internal/manager"
)

// ScrubConfig is the background scrub's: it re-verifies every kept segment
// version at least once per Interval, reading at most MaxThroughput bytes
// per second on each replica.
//
// On by default (weekly, 8 MiB/s): damage to blobs that no read touches
// (bit rot, a truncated copy, a proxy altering data) is otherwise found
// only when a read needs them, which may be long after the last good copy
// is gone; a weekly pass at 8 MiB/s costs a replica about one core-percent
// of decoding and its bucket one GET per blob per week. --scrub-interval 0
// turns it off (for example where each GET is billed and verify jobs run
// from cron instead).
type ScrubConfig struct {
	Interval      time.Duration
	MaxThroughput int64 // bytes per second; 0: no cap
}

// DefaultScrubConfig returns the defaults documented on the flags.
func DefaultScrubConfig() ScrubConfig {
	return ScrubConfig{Interval: 7 * 24 * time.Hour, MaxThroughput: 8 << 20}
}

// RegisterFlags registers --scrub-interval and --scrub-max-throughput.
func (c *ScrubConfig) RegisterFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&c.Interval, "scrub-interval", c.Interval, "how often the background scrub re-verifies each kept segment version (0: no scrub)")
	fs.Var((*scrubBytes)(&c.MaxThroughput), "scrub-max-throughput", "bytes per second the scrub's verify jobs read on this replica, e.g. 8MiB (0: no cap)")
}

// Validate rejects a negative interval or throughput, and an interval under
// a minute (the scrub would spin).
func (c ScrubConfig) Validate() error {
	switch {
	case c.Interval < 0 || (c.Interval > 0 && c.Interval < time.Minute):
		return fmt.Errorf("--scrub-interval must be 0 (no scrub) or at least 1m, got %s", c.Interval)
	case c.MaxThroughput < 0:
		return fmt.Errorf("--scrub-max-throughput must not be negative, got %d", c.MaxThroughput)
	}
	return nil
}

type scrubBytes int64

func (b *scrubBytes) String() string { return humanize.IBytes(uint64(*b)) }
func (b *scrubBytes) Type() string   { return "bytes" }
func (b *scrubBytes) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil || n > math.MaxInt64 {
		return fmt.Errorf("%q is not a size in bytes (e.g. 8MiB, 0)", s)
	}
	*b = scrubBytes(n)
	return nil
}

// scrubBatch bounds the verify jobs one scrub pass queues (one per
// collection at most: the queue keeps one queued verify job per
// collection); the next pass queues the rest.
const scrubBatch = 16

// scrubber queues, every pass, SCHEDULED verify jobs (params scrub) for
// the kept versions verified longest ago, once that is more than the
// interval ago. The jobs run in the queue like any other (a replica runs
// them at --scrub-max-throughput); a failure marks the version in the
// catalog (versions.verify_error), counts in
// compactor_verification_failures_total{phase="scrub"} and fires the
// alert, and the collection's next compaction rebuilds the version from
// the last good one. Several replicas may run it: the queue's one queued
// job per collection and kind makes a second pass's jobs the same jobs.
// It is used by one goroutine (run).
type scrubber struct {
	cat interface {
		VersionsToScrub(ctx context.Context, before time.Time, limit int) ([]catalog.Version, error)
	}
	mgr interface {
		Verify(ctx context.Context, collectionID string, params jobtype.VerifyParams, reason string) (manager.Enqueued, error)
	}
	cfg ScrubConfig
	now func() time.Time
	log *slog.Logger
}

// runOnce queues the verify jobs of one pass and returns how many it
// created.
func (s *scrubber) runOnce(ctx context.Context) (int, error) {
	vs, err := s.cat.VersionsToScrub(ctx, s.now().Add(-s.cfg.Interval), scrubBatch)
	if err != nil {
		return 0, err
	}
	created := 0
	for _, v := range vs {
		e, err := s.mgr.Verify(ctx, v.CollectionID, jobtype.VerifyParams{Version: v.Version, Scrub: true}, "scrub")
		var nf *manager.NotFoundError
		switch {
		case errors.As(err, &nf):
			continue // deleted meanwhile
		case err != nil:
			return created, err
		}
		if e.Created {
			created++
		}
	}
	return created, nil
}

// run runs a pass every tenth of the interval (between 1 minute and 1
// hour, with up to 10 % jitter) until ctx ends. Errors are logged.
func (s *scrubber) run(ctx context.Context) {
	if s.cfg.Interval <= 0 {
		return
	}
	period := min(max(s.cfg.Interval/10, time.Minute), time.Hour)
	for {
		t := time.NewTimer(period + time.Duration(rand.Int64N(int64(period/10)+1)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		n, err := s.runOnce(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("scrub pass", "err", err)
		}
		if n > 0 {
			s.log.Info("scrub queued verify jobs", "jobs", n)
		}
	}
}
