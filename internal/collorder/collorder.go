// Package collorder is the vocabulary of ordered collection listings that
// the catalog and the status page share: the names of the orders and a
// collection's position in an order, its cursor. The page hands its
// cursors to the catalog as they are, so both must place a collection
// alike; the placing is written here, once.
//
// The package is a leaf: it imports nothing of the project.
package collorder

import "time"

// The orders of a collection listing. Name is by name (byte order); the
// others are by a figure, ties by name ascending.
const (
	Name          = "name"
	Backlog       = "backlog"        // log records not yet compacted
	Records       = "records"        // records in the current segment version
	LastCompacted = "last_compacted" // the last compaction; never compacted sorts first
)

// Cursor is a collection's position in an order: its name and, in a
// figure's order, its figure (the backlog or record count, or the last
// compaction in unix milliseconds, 0 for never).
type Cursor struct {
	Value int64
	Name  string
}

// Of is the position in order sort of the collection named name with
// backlog log records not yet compacted, records records in its current
// version and its last compaction at lastCompacted (zero: never). In the
// order by name, or any order not listed above, Value is 0.
func Of(sort, name string, backlog, records int64, lastCompacted time.Time) Cursor {
	cur := Cursor{Name: name}
	switch sort {
	case Backlog:
		cur.Value = backlog
	case Records:
		cur.Value = records
	case LastCompacted:
		if !lastCompacted.IsZero() {
			cur.Value = lastCompacted.UnixMilli()
		}
	}
	return cur
}
