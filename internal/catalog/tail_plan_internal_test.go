package catalog

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestTailQueriesSeekTheRecordIDIndex: on SQLite (no table statistics, so
// the planner's choice follows the text alone), every tail read that names
// record ids seeks the record-id index rather than walking the primary key
// over the tail's offsets, whose cost grows with the tail (a page of a
// 1,000,000-row uncompacted log took 1.3 s in the rest-of-id read).
func TestTailQueriesSeekTheRecordIDIndex(t *testing.T) {
	ctx := context.Background()
	c, err := Open(ctx, Config{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "catalog.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"rest of one id": {tailRestOfID, []any{"c", []byte("id"), int64(1), int64(2)}},
	} {
		rows, err := c.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+c.d.q(q.sql), q.args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if got := strings.Join(plan, "; "); !strings.Contains(got, "INDEX log_collection_record (collection_id=? AND record_id=?") {
			t.Errorf("%s: plan %q, want a seek of log_collection_record by collection and record id", name, got)
		}
	}
}
