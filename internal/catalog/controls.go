package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/compactorhq/compactor/internal/audit"
)

// Operator controls persisted in the catalog, so that they survive restarts
// and hold for every replica: a collection's pause and threshold overrides
// (columns of its row), and cluster-wide settings (the settings table).

// Bounds of operator-given texts.
const (
	maxControlText  = 1024 // bytes of a pause reason or a "who"
	maxSettingValue = 1024 // bytes of a setting's value
)

// CollectionSettings override the scheduler's thresholds for one
// collection. A zero field inherits the server's flag.
type CollectionSettings struct {
	// MinCompactionSize: a backlog (records) at which the scheduler
	// compacts the collection; 0: --min-compaction-size.
	MinCompactionSize int64
	// MaxUncompactedAge: the age of the oldest uncompacted record at which
	// the scheduler compacts the collection, whatever its backlog; 0:
	// --max-uncompacted-age. Stored to the millisecond.
	MaxUncompactedAge time.Duration
}

// Setting is one cluster-wide setting changed at run time.
type Setting struct {
	Name      string
	Value     string
	Reason    string // why, as the operator said
	UpdatedBy string // who changed it
	UpdatedAt time.Time
}

// Names of the settings the server uses.
const (
	// SettingSchedulerPaused is "true" while automatic compaction is paused
	// on every collection; absent or any other value: not paused.
	SettingSchedulerPaused = "scheduler.paused"
	// SettingMaxThroughput is the cap on bytes per second written by the
	// compactions of each node, in decimal; "0" or absent: the node's flag.
	SettingMaxThroughput = "compaction.max_throughput_bytes"
)

// settingAction is the audit action of a change of setting s.
func settingAction(s Setting) string {
	switch s.Name {
	case SettingSchedulerPaused:
		if s.Value == "true" {
			return audit.ActionPause
		}
		return audit.ActionResume
	case SettingMaxThroughput:
		return audit.ActionThrottle
	}
	return audit.ActionSettings
}

func checkControlText(what, s string) error {
	if len(s) > maxControlText {
		return fmt.Errorf("%s is %d bytes, more than %d: %w", what, len(s), maxControlText, ErrInvalidArgument)
	}
	return nil
}

// SetCollectionPause pauses (paused true, with reason and who) or resumes
// automatic compaction of a collection, and returns the collection as
// stored. Pausing a paused collection replaces its reason, who and time.
// Errors: ErrNotFound, ErrInvalidArgument (a reason or who over 1,024
// bytes), ErrUnavailable.
func (c *Catalog) SetCollectionPause(ctx context.Context, id string, paused bool, reason, by string) (Collection, error) {
	if err := errors.Join(checkControlText("pause reason", reason), checkControlText("who", by)); err != nil {
		return Collection{}, fmt.Errorf("pause collection %s: %w", id, err)
	}
	now := ms(c.now())
	at := any(nil)
	if !paused {
		reason, by = "", ""
	} else {
		at = now
	}
	action := audit.ActionResume
	if paused {
		action = audit.ActionPause
	}
	entry := func(before, after Collection) AuditEntry {
		return AuditEntry{Action: action, CollectionID: id, Target: id, Reason: reason,
			Before: pauseState(before), After: pauseState(after)}
	}
	col, err := c.updateCollection(ctx, id, entry, `paused_at = ?, pause_reason = ?, paused_by = ?, updated_at = ?`, at, reason, by, now)
	if err != nil {
		return Collection{}, c.wrap(err, "set pause of collection %s", id)
	}
	return col, nil
}

func pauseState(c Collection) map[string]any {
	return map[string]any{"paused": c.Paused(), "reason": c.PauseReason, "by": c.PausedBy}
}

func settingsState(c Collection) map[string]any {
	return map[string]any{"min_compaction_size": c.Settings.MinCompactionSize,
		"max_uncompacted_age_ms": c.Settings.MaxUncompactedAge.Milliseconds()}
}

// updateCollection sets columns of collection id (set is the SET list,
// args its values) and returns the row as stored, in one transaction. With
// entry set, the transaction also appends the audit event entry makes of
// the row before and after, when ctx carries an actor. ErrNotFound when
// there is no such collection.
func (c *Catalog) updateCollection(ctx context.Context, id string, entry func(before, after Collection) AuditEntry, set string, args ...any) (Collection, error) {
	var col Collection
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		var before Collection
		if _, audited := audit.ActorFrom(ctx); audited && entry != nil {
			var err error
			if before, err = c.queryCollection(ctx, tx, id); err != nil {
				return err
			}
		}
		if err := c.updateOne(ctx, tx, `UPDATE collections SET `+set+` WHERE id = ?`, append(args, id)...); err != nil {
			return err
		}
		var err error
		if col, err = c.queryCollection(ctx, tx, id); err != nil {
			return err
		}
		if entry == nil {
			return nil
		}
		return c.auditFromContext(ctx, tx, entry(before, col))
	})
	return col, err
}

// SetCollectionSettings replaces a collection's threshold overrides and
// returns the collection as stored. Errors: ErrInvalidArgument (a negative
// size or age, an age under one second), ErrNotFound, ErrUnavailable.
func (c *Catalog) SetCollectionSettings(ctx context.Context, id string, s CollectionSettings) (Collection, error) {
	switch {
	case s.MinCompactionSize < 0:
		return Collection{}, fmt.Errorf("collection %s: minimum compaction size %d must not be negative: %w", id, s.MinCompactionSize, ErrInvalidArgument)
	case s.MaxUncompactedAge < 0 || (s.MaxUncompactedAge > 0 && s.MaxUncompactedAge < time.Second):
		return Collection{}, fmt.Errorf("collection %s: maximum uncompacted age %s must be 0 (the server's) or at least 1s: %w", id, s.MaxUncompactedAge, ErrInvalidArgument)
	}
	nullable := func(v int64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	entry := func(before, after Collection) AuditEntry {
		return AuditEntry{Action: audit.ActionSettings, CollectionID: id, Target: id,
			Before: settingsState(before), After: settingsState(after)}
	}
	col, err := c.updateCollection(ctx, id, entry, `min_compaction_size = ?, max_uncompacted_age_ms = ?, updated_at = ?`,
		nullable(s.MinCompactionSize), nullable(s.MaxUncompactedAge.Milliseconds()), ms(c.now()))
	if err != nil {
		return Collection{}, c.wrap(err, "set settings of collection %s", id)
	}
	return col, nil
}

// PutSetting stores a cluster-wide setting (UpdatedAt is set to now) and
// returns it as stored. Errors: ErrInvalidArgument (an empty name, a value,
// reason or who over 1,024 bytes), ErrUnavailable.
func (c *Catalog) PutSetting(ctx context.Context, s Setting) (Setting, error) {
	if s.Name == "" {
		return Setting{}, fmt.Errorf("put setting: empty name: %w", ErrInvalidArgument)
	}
	if len(s.Value) > maxSettingValue {
		return Setting{}, fmt.Errorf("setting %s: value is %d bytes, more than %d: %w", s.Name, len(s.Value), maxSettingValue, ErrInvalidArgument)
	}
	if err := errors.Join(checkControlText("reason", s.Reason), checkControlText("who", s.UpdatedBy)); err != nil {
		return Setting{}, fmt.Errorf("setting %s: %w", s.Name, err)
	}
	s.UpdatedAt = fromMs(ms(c.now()))
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		before := ""
		_, audited := audit.ActorFrom(ctx)
		if audited {
			err := tx.QueryRowContext(ctx, c.d.q(`SELECT value FROM settings WHERE name = ?`), s.Name).Scan(&before)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO settings (name, value, reason, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, reason = excluded.reason,
				updated_by = excluded.updated_by, updated_at = excluded.updated_at`),
			s.Name, s.Value, s.Reason, s.UpdatedBy, ms(s.UpdatedAt))
		if err != nil || !audited {
			return err
		}
		return c.auditFromContext(ctx, tx, AuditEntry{
			Action: settingAction(s), Target: audit.TargetAll, Reason: s.Reason,
			Before: map[string]any{s.Name: before}, After: map[string]any{s.Name: s.Value},
		})
	})
	if err != nil {
		return Setting{}, c.wrap(err, "put setting %s", s.Name)
	}
	return s, nil
}

// GetSetting returns a cluster-wide setting. ErrNotFound when it was never
// set.
func (c *Catalog) GetSetting(ctx context.Context, name string) (Setting, error) {
	var (
		s  Setting
		at int64
	)
	err := c.r.QueryRowContext(ctx, c.d.q(`SELECT name, value, reason, updated_by, updated_at FROM settings WHERE name = ?`), name).
		Scan(&s.Name, &s.Value, &s.Reason, &s.UpdatedBy, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Setting{}, fmt.Errorf("setting %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Setting{}, c.wrap(err, "get setting %s", name)
	}
	s.UpdatedAt = fromMs(at)
	return s, nil
}
