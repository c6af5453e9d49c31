package catalog_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/catalog/catalogtest"
	"github.com/compactorhq/compactor/internal/jobtype"
)

func TestOpenRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  catalog.Config
	}{
		{"an unknown driver", catalog.Config{Driver: "mysql", DSN: filepath.Join(t.TempDir(), "c.db")}},
		{"an empty DSN", catalog.Config{}},
		{"an in-memory SQLite database", catalog.Config{DSN: ":memory:"}},
		{"an in-memory SQLite URI", catalog.Config{DSN: "file:x?mode=memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := catalog.Open(ctx, tt.cfg)
			if err == nil {
				_ = c.Close()
			}
			wantErr(t, "Open", err, catalog.ErrInvalidArgument)
		})
	}
}

func TestOpenCreatesTheDataDirectory(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "a", "b", "catalog.db")
	c := catalogtest.OpenConfig(t, catalog.Config{DSN: dsn})
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if _, err := os.Stat(dsn); err != nil {
		t.Fatalf("database file: %v", err)
	}
}

func TestPingAfterCloseIsUnavailable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := c.Ping(ctx); !errors.Is(err, catalog.ErrUnavailable) {
			t.Fatalf("Ping after Close: %v, want ErrUnavailable", err)
		}
	})
}

// TestReopenKeepsData closes and reopens the same database: the data is
// still there and applying the migrations again changes nothing.
func TestReopenKeepsData(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		c, err := catalog.Open(ctx, catalog.Config{Driver: e.driver, DSN: e.dsn, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		col := mustCreate(t, c, "durable", 2)
		mustAppend(t, c, col.ID, adds("a", 5, 2))
		job := catalog.Job{ID: uuid.NewString(), CollectionID: col.ID, Kind: jobtype.KindCompaction, Trigger: catalog.TriggerOneOff, State: catalog.JobRunning, CreatedAt: ms(e.clock.Now())}
		if err := c.InsertJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Second)
		if err := c.CommitCompaction(ctx, catalog.Commit{CollectionID: col.ID, BaseVersion: 0, NewVersion: 1, ManifestKey: "v1", CompactionOffset: 3, RecordCount: 3}); err != nil {
			t.Fatal(err)
		}
		wantCol := mustGet(t, c, col.ID)
		wantLog := mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			c := e.open(t)
			equal(t, "collection", mustGet(t, c, col.ID), wantCol)
			equal(t, "log", mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0), wantLog)
			got, err := c.GetJob(ctx, job.ID)
			if err != nil {
				t.Fatal(err)
			}
			job.CollectionName = col.Name // read with the job
			equal(t, "job", got, job)
			if first, _, err := c.AppendLog(ctx, col.ID, adds("more", 1, 2), catalog.AppendLimits{}); err != nil || first != int64(6+i) {
				t.Fatalf("append after reopen %d: offset %d, %v; want %d", i, first, err, 6+i)
			}
			wantCol, wantLog = mustGet(t, c, col.ID), mustReadLog(t, c, col.ID, 0, math.MaxInt64, 0)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
