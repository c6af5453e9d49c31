package manager

import (
	"context"
	"errors"
	"fmt"
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
	return readPause(ctx, m.store)
}

// readPause reads the global pause from the catalog's settings.
func readPause(ctx context.Context, store interface {
	GetSetting(ctx context.Context, name string) (catalog.Setting, error)
}) (PauseState, error) {
	s, err := store.GetSetting(ctx, catalog.SettingSchedulerPaused)
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

// ClearDeadLetter clears a dead-lettered collection's failure state by
// hand (an operator's undead), recording who and why in its dead-letter
// history in the same transaction; the scheduler compacts it again at its
// next run. cleared is false when the collection was not dead-lettered
// (nothing is written). Errors: ErrNotFound, store errors.
func (m *Manager) ClearDeadLetter(ctx context.Context, collectionID, actor, reason string) (c catalog.Collection, cleared bool, err error) {
	c, cleared, err = m.store.ClearDeadLetter(ctx, collectionID, actor, reason)
	if err != nil {
		return catalog.Collection{}, false, err
	}
	if cleared {
		m.logger.Info("dead-letter state cleared", "collection", collectionID, "by", actor, "reason", reason)
		m.metrics.backlogs.update(c)
	}
	return c, cleared, nil
}

// DeadLetterHistory returns a collection's dead-letter events, newest
// first, at most limit (<= 0: 100). Errors: the store's.
func (m *Manager) DeadLetterHistory(ctx context.Context, collectionID string, limit int) ([]catalog.DeadLetterEvent, error) {
	return m.store.ListDeadLetterEvents(ctx, collectionID, limit)
}
