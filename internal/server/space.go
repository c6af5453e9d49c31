package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// probeKey is the blob the readiness probe writes (and deletes) while the
// blob store is full: outside every collection's prefix, so GC and listings
// never see it.
const probeKey = "_readiness-probe"

// probeBytes is the size of the probe blob: a write of that size must fit
// before the blob store counts as writable again.
const probeBytes = 1 << 20

// spaceBlobs wraps the blob store: a Put that fails with ENOSPC or EDQUOT
// returns a *catalog.StorageFullError naming the blob store and marks the
// store full; readiness reports it until a probe write succeeds (writable).
type spaceBlobs struct {
	segment.Blobs
	log  *slog.Logger
	full atomic.Pointer[catalog.StorageFullError]
}

func (b *spaceBlobs) Put(ctx context.Context, key string, data []byte) error {
	err := b.Blobs.Put(ctx, key, data)
	if code, ok := catalog.IsNoSpace(err); ok {
		full := &catalog.StorageFullError{Store: catalog.StoreBlobs, Code: code, Err: err}
		if b.full.Swap(full) == nil {
			b.log.Warn("blob store full: compactions fail until space is freed", "code", code, "err", err)
		}
		return fmt.Errorf("put blob %s: %w", key, full)
	}
	return err
}

// writable is nil unless a Put failed for want of space; then it writes a
// probe blob of probeBytes (and deletes it) and clears the state when that
// works.
func (b *spaceBlobs) writable(ctx context.Context) error {
	full := b.full.Load()
	if full == nil {
		return nil
	}
	err := b.Blobs.Put(ctx, probeKey, make([]byte, probeBytes))
	if err == nil {
		err = b.Blobs.Delete(ctx, probeKey)
	}
	if err != nil {
		if code, ok := catalog.IsNoSpace(err); ok {
			return &catalog.StorageFullError{Store: catalog.StoreBlobs, Code: code, Err: err}
		}
		return fmt.Errorf("probe blob store write: %w (the last write failed with: %w)", err, full)
	}
	if b.full.CompareAndSwap(full, nil) {
		b.log.Info("blob store writable again")
	}
	return nil
}

// storageFullGauge is compactor_storage_full{store}: 1 while a store is
// out of space, 0 otherwise. A scrape runs the store's writable check (the
// one of /readyz: a probe write only while the store is marked full), so
// the gauge falls back to 0 once space is freed even where nothing polls
// /readyz.
func storageFullGauge(reg prometheus.Registerer, checks map[string]func(context.Context) error) {
	for store, check := range checks {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "compactor_storage_full",
			Help:        "1 while a store (catalog or blobs) is out of space: writes to it fail until space is freed.",
			ConstLabels: prometheus.Labels{"store": store},
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if errors.Is(check(ctx), catalog.ErrStorageFull) {
				return 1
			}
			return 0
		}))
	}
}

// notReady is the reason readiness gives for a failed writable check: the
// message of a *catalog.StorageFullError (which names the store and what to
// do, and no server path), or a generic one naming the store.
func notReady(store string, err error) string {
	var full *catalog.StorageFullError
	if errors.As(err, &full) {
		return "not ready: " + full.Error()
	}
	return "not ready: the " + store + " does not take writes (see the server log)"
}
