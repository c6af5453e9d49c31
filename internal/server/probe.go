package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/compactorhq/compactor/internal/segment"
)

// probeStreak is how many probes in a row must disagree with the blob
// store's state before it changes (reachable → unreachable and back), so
// that one slow or failed call does not flip readiness.
const probeStreak = 2

// probeTimeout bounds one probe of the blob store.
const probeTimeout = 5 * time.Second

// errShuttingDown closes the claim gate at shutdown.
var errShuttingDown = errors.New("shutting down")

// blobProbe checks that the blob store takes writes: every interval it
// writes a small blob of its own (health/<node>), which every replica may do
// at once without harm. Readiness and the manager's claim gate read the
// state it keeps, so that neither calls the blob store itself. The store is
// unreachable after probeStreak failed probes in a row, and reachable again
// after probeStreak successes in a row. The goroutine of run owns the
// probing; mu guards the state the others read.
type blobProbe struct {
	blobs segment.Blobs
	key   string
	now   func() time.Time // the process's clock: the time the probe blob holds
	log   *slog.Logger

	mu     sync.Mutex
	streak int   // probes in a row that disagree with down
	down   bool  // unreachable
	err    error // the last failure while down
}

func newBlobProbe(blobs segment.Blobs, node string, now func() time.Time, log *slog.Logger) *blobProbe {
	return &blobProbe{blobs: blobs, key: "health/" + url.PathEscape(node), now: now, log: log}
}

// run probes at once, then every interval until ctx ends.
func (p *blobProbe) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check probes the blob store once and updates the state.
func (p *blobProbe) check(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := p.blobs.Put(pctx, p.key, []byte(p.now().UTC().Format(time.RFC3339)))
	if ctx.Err() != nil {
		return // shutting down: no verdict
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if failed := err != nil; failed != p.down {
		p.streak++
	} else {
		p.streak = 0
	}
	if p.down && err != nil {
		p.err = err
	}
	if p.streak < probeStreak {
		return
	}
	p.streak, p.down = 0, !p.down
	if p.down {
		p.err = err
		p.log.Warn("blob store unreachable: not ready, no job claimed until it returns", "err", err)
	} else {
		p.err = nil
		p.log.Info("blob store reachable again")
	}
}

// unreachable is nil while the blob store takes writes, else an error
// saying it does not, wrapping the last probe's.
func (p *blobProbe) unreachable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down {
		return nil
	}
	return fmt.Errorf("blob store unreachable: %w", p.err)
}
