package manager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/compactorhq/compactor/internal/catalog"
)

// Throttler is implemented by an Executor whose compactions can be capped
// in bytes written per second; the manager applies the cap in force.
type Throttler interface {
	SetMaxThroughput(bytesPerSecond int64)
}

// Throughput is the cap on bytes per second written by compactions.
type Throughput struct {
	// Cap in force on this node, in bytes per second; 0: none.
	BytesPerSecond int64
	// Override is the cap an operator set for every node at run time (it
	// wins over each node's --max-throughput); 0: none set.
	Override int64
	By       string
	Since    time.Time
}

// settingStore is the slice of the Store the throughput applier uses.
type settingStore interface {
	GetSetting(ctx context.Context, name string) (catalog.Setting, error)
	PutSetting(ctx context.Context, s catalog.Setting) (catalog.Setting, error)
}

// throughputApplier applies the throughput cap in force (the catalog's
// run-time override, else this node's --max-throughput) to the executor.
// Its mu serializes applications, so that a cap read before an operator's
// change is never applied after it; it has no other state.
type throughputApplier struct {
	store      settingStore
	configured int64     // this node's --max-throughput
	throttle   Throttler // nil: the executor cannot be capped
	gauge      prometheus.Gauge
	logger     *slog.Logger

	mu sync.Mutex
}

// read returns the cap in force and the override behind it, if any.
func (t *throughputApplier) read(ctx context.Context) (Throughput, error) {
	s, err := t.store.GetSetting(ctx, catalog.SettingMaxThroughput)
	if errors.Is(err, catalog.ErrNotFound) {
		return Throughput{BytesPerSecond: t.configured}, nil
	}
	if err != nil {
		return Throughput{}, fmt.Errorf("read the throughput cap: %w", err)
	}
	override, perr := strconv.ParseInt(s.Value, 10, 64)
	if perr != nil || override < 0 {
		return Throughput{}, fmt.Errorf("setting %s holds %q, not a number of bytes per second", s.Name, s.Value)
	}
	c := Throughput{BytesPerSecond: t.configured, Override: override, By: s.UpdatedBy, Since: s.UpdatedAt}
	if override > 0 {
		c.BytesPerSecond = override
	}
	return c, nil
}

// set writes the run-time override and applies it.
func (t *throughputApplier) set(ctx context.Context, bytesPerSecond int64, by string) (Throughput, error) {
	if bytesPerSecond < 0 {
		return Throughput{}, fmt.Errorf("throughput cap %d must not be negative: %w", bytesPerSecond, ErrInvalidArgument)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.store.PutSetting(ctx, catalog.Setting{Name: catalog.SettingMaxThroughput, Value: strconv.FormatInt(bytesPerSecond, 10), UpdatedBy: by}); err != nil {
		return Throughput{}, fmt.Errorf("set the throughput cap: %w", err)
	}
	t.logger.Info("throughput cap set", "bytes_per_second", bytesPerSecond, "by", by)
	return t.applyLocked(ctx)
}

// runOnce reads the cap in force and applies it to the executor.
func (t *throughputApplier) runOnce(ctx context.Context) (Throughput, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applyLocked(ctx)
}

func (t *throughputApplier) applyLocked(ctx context.Context) (Throughput, error) {
	c, err := t.read(ctx)
	if err != nil {
		return Throughput{}, err
	}
	if t.throttle != nil {
		t.throttle.SetMaxThroughput(c.BytesPerSecond)
	}
	t.gauge.Set(float64(c.BytesPerSecond))
	return c, nil
}

// MaxThroughput returns the throughput cap in force on this node and the
// run-time override behind it, if any.
func (m *Manager) MaxThroughput(ctx context.Context) (Throughput, error) {
	return m.throughput.read(ctx)
}

// SetMaxThroughput sets the cap on bytes per second written by the
// compactions of every node (each node applies it within
// Config.PollInterval; this one at once); 0 removes the override, and each
// node's --max-throughput applies again. Errors: ErrInvalidArgument for a
// negative cap, store errors.
func (m *Manager) SetMaxThroughput(ctx context.Context, bytesPerSecond int64, by string) (Throughput, error) {
	return m.throughput.set(ctx, bytesPerSecond, by)
}
