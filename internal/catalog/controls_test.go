package catalog_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/catalog"
)

func TestCollectionPauseAndSettingsPersist(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		col := mustCreate(t, c, "controlled", 0)
		at := ms(e.clock.Now())
		got, err := c.SetCollectionPause(ctx, col.ID, true, "reindexing upstream", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Paused() || !got.PausedAt.Equal(at) || got.PauseReason != "reindexing upstream" || got.PausedBy != "alice" {
			t.Fatalf("paused collection %+v", got)
		}
		settings := catalog.CollectionSettings{MinCompactionSize: 5000, MaxUncompactedAge: 90 * time.Second}
		if _, err := c.SetCollectionSettings(ctx, col.ID, settings); err != nil {
			t.Fatal(err)
		}
		// Both survive a reopen (they are the catalog's, not a process's).
		reopened := e.open(t)
		got = mustGet(t, reopened, col.ID)
		if !got.Paused() || got.PausedBy != "alice" || got.Settings != settings {
			t.Fatalf("after reopening: paused %v by %q, settings %+v", got.Paused(), got.PausedBy, got.Settings)
		}
		got, err = c.SetCollectionPause(ctx, col.ID, false, "ignored", "bob")
		if err != nil || got.Paused() || got.PauseReason != "" || got.PausedBy != "" {
			t.Fatalf("resumed collection %+v, %v", got, err)
		}
		if got, err = c.SetCollectionSettings(ctx, col.ID, catalog.CollectionSettings{}); err != nil || got.Settings != (catalog.CollectionSettings{}) {
			t.Fatalf("cleared settings %+v, %v", got.Settings, err)
		}

		_, err = c.SetCollectionPause(ctx, "no-such-collection", true, "", "")
		wantErr(t, "pause of an unknown collection", err, catalog.ErrNotFound)
		_, err = c.SetCollectionPause(ctx, col.ID, true, strings.Repeat("x", 1025), "")
		wantErr(t, "pause with an oversized reason", err, catalog.ErrInvalidArgument)
		for _, bad := range []catalog.CollectionSettings{{MinCompactionSize: -1}, {MaxUncompactedAge: -time.Second}, {MaxUncompactedAge: time.Millisecond}} {
			_, err = c.SetCollectionSettings(ctx, col.ID, bad)
			wantErr(t, fmt.Sprintf("settings %+v", bad), err, catalog.ErrInvalidArgument)
		}
	})
}

func TestSettings(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c := e.open(t)
		_, err := c.GetSetting(ctx, catalog.SettingSchedulerPaused)
		wantErr(t, "GetSetting never set", err, catalog.ErrNotFound)
		put := catalog.Setting{Name: catalog.SettingSchedulerPaused, Value: "true", Reason: "maintenance", UpdatedBy: "ops"}
		stored, err := c.PutSetting(ctx, put)
		if err != nil {
			t.Fatal(err)
		}
		put.UpdatedAt = ms(e.clock.Now())
		equal(t, "stored setting", stored, put)
		e.clock.Advance(time.Minute)
		put.Value, put.Reason = "false", "done"
		if _, err := c.PutSetting(ctx, put); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetSetting(ctx, catalog.SettingSchedulerPaused)
		put.UpdatedAt = ms(e.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "replaced setting", got, put)
		_, err = c.PutSetting(ctx, catalog.Setting{})
		wantErr(t, "PutSetting without a name", err, catalog.ErrInvalidArgument)
	})
}

func fmtAny(v any) string {
	return strings.TrimSpace(strings.ReplaceAll(fmt.Sprintf("%+v", v), "  ", " "))
}
