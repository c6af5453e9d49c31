package manager

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

// Operator controls (after Cassandra's disableautocompaction and Milvus's
// per-collection switch): automatic compaction paused for every collection
// or for one, and per-collection thresholds. They are catalog rows, so they
// survive restarts and hold for every replica; one-off compactions run
// whatever the pause (they are the operator's explicit intent).

// PauseState says whether and why automatic compaction is paused.
type PauseState struct {
	Paused bool
	Reason string
	By     string    // who paused it
	Since  time.Time // when
}

// SchedulerPause returns the global pause. A catalog error is returned as
// is; a pause never set reads as not paused.
func (m *Manager) SchedulerPause(ctx context.Context) (PauseState, error) {
	s, err := m.store.GetSetting(ctx, catalog.SettingSchedulerPaused)
	if errors.Is(err, catalog.ErrNotFound) {
		return PauseState{}, nil
	}
	if err != nil {
		return PauseState{}, fmt.Errorf("read the scheduler's pause: %w", err)
	}
	if s.Value != "true" {
		return PauseState{}, nil
	}
	return PauseState{Paused: true, Reason: s.Reason, By: s.UpdatedBy, Since: s.UpdatedAt}, nil
}

// Pause pauses automatic compaction: of every collection when collectionID
// is "", else of that one. reason and by (who) are kept with it, at most
// 1,024 bytes each. The scheduler skips what is paused from its next run;
// queued and running jobs are not touched (cancel them to stop them).
// Errors: ErrNotFound for an unknown collection, ErrInvalidArgument, store
// errors.
func (m *Manager) Pause(ctx context.Context, collectionID, reason, by string) error {
	return m.setPause(ctx, collectionID, true, reason, by)
}

// Resume resumes automatic compaction paused by Pause (collectionID "" for
// the global pause; a collection's own pause stays until resumed itself).
func (m *Manager) Resume(ctx context.Context, collectionID, by string) error {
	return m.setPause(ctx, collectionID, false, "", by)
}

func (m *Manager) setPause(ctx context.Context, collectionID string, paused bool, reason, by string) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	if collectionID != "" {
		if _, err := m.store.SetCollectionPause(ctx, collectionID, paused, reason, by); err != nil {
			return fmt.Errorf("%s compaction of collection %s: %w", verb, collectionID, err)
		}
		m.logger.Info("automatic compaction "+verb+"d", "collection", collectionID, "reason", reason, "by", by)
		return nil
	}
	value := "false"
	if paused {
		value = "true"
	}
	if _, err := m.store.PutSetting(ctx, catalog.Setting{Name: catalog.SettingSchedulerPaused, Value: value, Reason: reason, UpdatedBy: by}); err != nil {
		return fmt.Errorf("%s automatic compaction: %w", verb, err)
	}
	m.metrics.schedulerPaused.Set(boolGauge(paused))
	m.logger.Info("automatic compaction "+verb+"d on every collection", "reason", reason, "by", by)
	return nil
}

// SetCollectionSettings replaces a collection's threshold overrides (zero
// fields inherit the server's flags) and returns the collection. Errors:
// ErrNotFound, ErrInvalidArgument, store errors.
func (m *Manager) SetCollectionSettings(ctx context.Context, collectionID string, s catalog.CollectionSettings) (catalog.Collection, error) {
	c, err := m.store.SetCollectionSettings(ctx, collectionID, s)
	if err != nil {
		return catalog.Collection{}, fmt.Errorf("set settings of collection %s: %w", collectionID, err)
	}
	return c, nil
}

// thresholds returns the scheduler's effective thresholds for c: its
// overrides, else the server's.
func (m *Manager) thresholds(c catalog.Collection) (minSize int64, maxAge time.Duration) {
	minSize, maxAge = m.cfg.MinCompactionSize, m.cfg.MaxAge
	if c.Settings.MinCompactionSize > 0 {
		minSize = c.Settings.MinCompactionSize
	}
	if c.Settings.MaxUncompactedAge > 0 {
		maxAge = c.Settings.MaxUncompactedAge
	}
	return minSize, maxAge
}

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

// MaxThroughput returns the throughput cap in force on this node and the
// run-time override behind it, if any.
func (m *Manager) MaxThroughput(ctx context.Context) (Throughput, error) {
	s, err := m.store.GetSetting(ctx, catalog.SettingMaxThroughput)
	if errors.Is(err, catalog.ErrNotFound) {
		return Throughput{BytesPerSecond: m.cfg.MaxThroughput}, nil
	}
	if err != nil {
		return Throughput{}, fmt.Errorf("read the throughput cap: %w", err)
	}
	override, perr := strconv.ParseInt(s.Value, 10, 64)
	if perr != nil || override < 0 {
		return Throughput{}, fmt.Errorf("setting %s holds %q, not a number of bytes per second", s.Name, s.Value)
	}
	t := Throughput{BytesPerSecond: m.cfg.MaxThroughput, Override: override, By: s.UpdatedBy, Since: s.UpdatedAt}
	if override > 0 {
		t.BytesPerSecond = override
	}
	return t, nil
}

// SetMaxThroughput sets the cap on bytes per second written by the
// compactions of every node (each node applies it within
// Config.PollInterval; this one at once); 0 removes the override, and each
// node's --max-throughput applies again. Errors: ErrInvalidArgument for a
// negative cap, store errors.
func (m *Manager) SetMaxThroughput(ctx context.Context, bytesPerSecond int64, by string) (Throughput, error) {
	if bytesPerSecond < 0 {
		return Throughput{}, fmt.Errorf("throughput cap %d must not be negative: %w", bytesPerSecond, ErrInvalidArgument)
	}
	if _, err := m.store.PutSetting(ctx, catalog.Setting{Name: catalog.SettingMaxThroughput, Value: strconv.FormatInt(bytesPerSecond, 10), UpdatedBy: by}); err != nil {
		return Throughput{}, fmt.Errorf("set the throughput cap: %w", err)
	}
	m.logger.Info("throughput cap set", "bytes_per_second", bytesPerSecond, "by", by)
	return m.applyThroughput(ctx)
}

// applyThroughput reads the cap in force and applies it to the executor.
func (m *Manager) applyThroughput(ctx context.Context) (Throughput, error) {
	t, err := m.MaxThroughput(ctx)
	if err != nil {
		return Throughput{}, err
	}
	if th, ok := m.exec.(Throttler); ok {
		th.SetMaxThroughput(t.BytesPerSecond)
	}
	m.metrics.maxThroughput.Set(float64(t.BytesPerSecond))
	return t, nil
}
