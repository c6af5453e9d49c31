package catalog

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Bounds of listCache: entries, and rows over all entries (a job or a
// collection row is a few hundred bytes, so about 8 MB at most).
const (
	maxListEntries = 64
	maxListRows    = 16_384
)

// listCache remembers, on a catalog this process holds exclusively, the
// results of the listing reads that clients poll (ListJobs: ListCompactions,
// the status page, the scheduler's active jobs; ListCollectionsPage:
// ListCollections), so that asking again for a list nothing has changed
// since runs no query. Validity is tailRows' counter of ended write
// transactions, with the same rule (see tailRows): a result read in a read
// that began at counter g is served while the counter is still g and no
// write transaction is open, and any write drops every result. A result is stored only if no write ended
// during its read. On a shared catalog (PostgreSQL) the cache is nil and
// remembers nothing.
type listCache struct {
	writes *tailRows // the counter of ended write transactions

	mu      sync.Mutex
	entries map[string]listEntry
	rows    int    // rows held by entries
	gen     uint64 // the counter every entry was read at
}

// listEntry is one remembered result: jobs or collections.
type listEntry struct {
	jobs  []Job
	colls []Collection
}

func newListCache(writes *tailRows) *listCache {
	if writes == nil {
		return nil
	}
	return &listCache{writes: writes}
}

// begin returns the counter a read about to begin is stamped with; 0 for a
// nil cache.
func (l *listCache) begin() uint64 {
	if l == nil {
		return 0
	}
	return l.writes.begin()
}

// get returns the entry of key if no write transaction ended since it was
// read.
func (l *listCache) get(key string) (listEntry, bool) {
	if l == nil {
		return listEntry{}, false
	}
	l.mu.Lock()
	e, ok := l.entries[key]
	gen := l.gen
	l.mu.Unlock()
	if !ok || !l.writes.holds(gen) {
		return listEntry{}, false
	}
	return e, true
}

// put remembers e under key, read in a read that began at counter gen,
// unless a write ended since.
func (l *listCache) put(key string, gen uint64, e listEntry) {
	n := len(e.jobs) + len(e.colls)
	if l == nil || gen != l.writes.begin() || n > maxListRows {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		l.entries = make(map[string]listEntry)
	}
	// The counter only grows: entries of an earlier one are stale for good
	// (and so is e, when a put of a later read came first).
	if gen < l.gen {
		return
	}
	if gen > l.gen {
		clear(l.entries)
		l.rows, l.gen = 0, gen
	}
	if old, ok := l.entries[key]; ok {
		l.rows -= len(old.jobs) + len(old.colls)
		delete(l.entries, key)
	}
	if len(l.entries) >= maxListEntries || l.rows+n > maxListRows {
		clear(l.entries)
		l.rows = 0
	}
	l.entries[key] = e
	l.rows += n
}

// jobsKey is the cache key of a ListJobs filter (the limit normalized).
func jobsKey(f JobFilter, limit int) string {
	var b strings.Builder
	b.WriteString("jobs\x00")
	b.WriteString(f.CollectionID)
	for _, k := range f.Kinds {
		b.WriteString("\x00k")
		b.WriteString(string(kindOrDefault(k)))
	}
	for _, s := range f.States {
		b.WriteString("\x00s")
		b.WriteString(string(s))
	}
	b.WriteString("\x00t")
	b.WriteString(string(f.Trigger))
	b.WriteString("\x00b")
	if !f.Before.IsZero() {
		b.WriteString(strconv.FormatInt(ms(f.Before.CreatedAt), 10))
		b.WriteByte(' ')
		b.WriteString(f.Before.ID)
	}
	b.WriteString("\x00f")
	if !f.FinishedSince.IsZero() {
		b.WriteString(strconv.FormatInt(ms(f.FinishedSince), 10))
	}
	b.WriteString("\x00l")
	b.WriteString(strconv.Itoa(limit))
	return b.String()
}

// collectionsKey is the cache key of a ListCollectionsPage call.
func collectionsKey(after string, limit int) string {
	return "collections\x00" + strconv.Itoa(limit) + "\x00" + after
}

// cloneJobs returns a copy of jobs the caller may change.
func cloneJobs(jobs []Job) []Job {
	out := slices.Clone(jobs)
	for i := range out {
		if p := out[i].Predicted; p != nil {
			c := *p
			out[i].Predicted = &c
		}
		if a := out[i].Actual; a != nil {
			c := *a
			out[i].Actual = &c
		}
	}
	return out
}

// cloneCollections returns a copy of colls the caller may change.
func cloneCollections(colls []Collection) []Collection {
	out := slices.Clone(colls)
	for i := range out {
		out[i].Policy.Windows = slices.Clone(out[i].Policy.Windows)
	}
	return out
}
