package catalog

import (
	"slices"
	"sync"
	"sync/atomic"
)

// maxTailRows bounds the collection rows tailRows keeps (a few hundred
// bytes each): past it, the rows of reads made before the last write are
// dropped, then, if still full, all.
const maxTailRows = 4096

// tailRows remembers, on a catalog this process holds exclusively (the
// SQLite process lock: no other process writes it), the collection rows of
// tail reads that found the uncompacted log tail empty, so that reading a
// compacted collection again (every QueryRecords and GetRecords of it) opens
// no read transaction while nothing was written since.
//
// Validity is one counter of ended write transactions and one of open ones
// (writeTxOn counts a transaction open before it begins and ended after its
// commit or rollback): a row read in a transaction that began with the
// counter at g is served while the counter is still g and no write
// transaction is open, since every change to a collection row or to the log
// is a write transaction of this process. A write that commits during the
// read bumps the counter after the read began, so the row is not kept;
// while a write is open, between its commit and its bump included, nothing
// is served, so a read that follows another read which saw a commit never
// answers from before it. Any write drops every row: a push to one
// collection costs the others one transaction each.
//
// On a shared catalog (PostgreSQL, or SQLite without the process lock)
// another process may write at any time, so nothing is remembered.
type tailRows struct {
	gen     atomic.Uint64 // write transactions ended
	writing atomic.Int64  // write transactions open
	mu      sync.Mutex
	rows    map[string]tailRow
}

type tailRow struct {
	gen uint64
	c   Collection
}

// began counts a write transaction about to begin; ended, the same one
// ended (committed or not). Between them nothing remembered is served.
func (t *tailRows) began() { t.writing.Add(1) }

func (t *tailRows) ended() {
	t.gen.Add(1) // before the open count falls: see holds
	t.writing.Add(-1)
}

// holds reports whether what a read stamped gen read may be served now: no
// write transaction is open and none ended since. The open count is read
// first: a write that ended before it bumped the counter before.
func (t *tailRows) holds(gen uint64) bool {
	return t.writing.Load() == 0 && t.gen.Load() == gen
}

// begin returns the counter a read about to begin is stamped with. The
// methods below take a nil *tailRows (a shared catalog) as one that
// remembers nothing.
func (t *tailRows) begin() uint64 {
	if t == nil {
		return 0
	}
	return t.gen.Load()
}

// get returns the remembered row of collection id, if no write transaction
// ended since it was read. The row is the caller's to change.
func (t *tailRows) get(id string) (Collection, bool) {
	if t == nil {
		return Collection{}, false
	}
	t.mu.Lock()
	r, ok := t.rows[id]
	t.mu.Unlock()
	if !ok || !t.holds(r.gen) {
		return Collection{}, false
	}
	c := r.c
	c.Policy.Windows = slices.Clone(c.Policy.Windows)
	return c, true
}

// put remembers c, read with an empty tail in a read transaction that began
// at counter gen.
func (t *tailRows) put(gen uint64, c Collection) {
	if t == nil || gen != t.gen.Load() {
		return
	}
	c.Policy.Windows = slices.Clone(c.Policy.Windows)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rows == nil {
		t.rows = make(map[string]tailRow)
	}
	if len(t.rows) >= maxTailRows {
		for id, r := range t.rows {
			if r.gen != gen {
				delete(t.rows, id)
			}
		}
		if len(t.rows) >= maxTailRows {
			clear(t.rows)
		}
	}
	t.rows[c.ID] = tailRow{gen: gen, c: c}
}
