package segment_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

const testCollection = "c0ffee00-0000-4000-8000-000000000001"

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newRecord returns a record with content drawn from rng: every document
// and metadata shape (nil, empty, values of each type) occurs.
func newRecord(rng *rand.Rand, id string, dim int) materialize.Record {
	r := materialize.Record{ID: id, Embedding: make([]float32, dim)}
	for i := range r.Embedding {
		r.Embedding[i] = rng.Float32()*2 - 1
	}
	switch rng.IntN(3) {
	case 1:
		d := ""
		r.Document = &d
	case 2:
		d := fmt.Sprintf("document of %s, revision %d", id, rng.IntN(1000))
		r.Document = &d
	}
	switch rng.IntN(3) {
	case 1:
		r.Metadata = materialize.Metadata{}
	case 2:
		r.Metadata = materialize.Metadata{"n": rng.NormFloat64(), "s": id, "b": rng.IntN(2) == 0}
	}
	return r
}

// records returns n records with ids fmt.Sprintf(format, i).
func records(rng *rand.Rand, format string, n, dim int) []materialize.Record {
	out := make([]materialize.Record, n)
	for i := range out {
		out[i] = newRecord(rng, fmt.Sprintf(format, i), dim)
	}
	return out
}

// upserts turns records (sorted) into changes.
func upserts(recs []materialize.Record) []segment.Change {
	out := make([]segment.Change, len(recs))
	for i := range recs {
		out[i] = segment.Change{ID: recs[i].ID, Record: &recs[i]}
	}
	return out
}

func deletes(ids ...string) []segment.Change {
	out := make([]segment.Change, len(ids))
	for i, id := range ids {
		out[i] = segment.Change{ID: id}
	}
	return out
}

// commit runs one Writer over base and writes its manifest.
func commit(t testing.TB, s *segment.Store, base *segment.Manifest, changes []segment.Change) (*segment.Manifest, segment.WriteReport, string) {
	t.Helper()
	ctx := context.Background()
	w := s.NewWriter(testCollection, base)
	m, stats, err := w.WriteBlocks(ctx, changes, 0, 0, nil)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	key, _, err := w.WriteManifest(ctx, m)
	if err != nil {
		t.Fatalf("write manifest: %v", err)
	}
	return m, stats, key
}

// checkManifest checks the invariants of m against the records it should
// hold, reading every block.
func checkManifest(t testing.TB, s *segment.Store, m *segment.Manifest, cfg segment.Config) []materialize.Record {
	t.Helper()
	var all []materialize.Record
	var total int64
	for i, b := range m.Blocks {
		if b.Records > int64(cfg.MaxBlockRecords) {
			t.Errorf("block %d holds %d records > max %d", i, b.Records, cfg.MaxBlockRecords)
		}
		if i > 0 && m.Blocks[i-1].MaxID >= b.MinID {
			t.Errorf("block %d range [%s, %s] not after block %d's [%s, %s]", i, b.MinID, b.MaxID, i-1, m.Blocks[i-1].MinID, m.Blocks[i-1].MaxID)
		}
		recs, err := s.ReadBlock(context.Background(), b)
		if err != nil {
			t.Fatalf("read block %d: %v", i, err)
		}
		all = append(all, recs...)
		total += b.Records
	}
	if total != m.RecordCount {
		t.Errorf("record count %d, blocks hold %d", m.RecordCount, total)
	}
	if !slices.IsSortedFunc(all, func(a, b materialize.Record) int { return strings.Compare(a.ID, b.ID) }) {
		t.Error("records not sorted across blocks")
	}
	return all
}

func blockKeys(m *segment.Manifest) []string {
	var out []string
	for _, b := range m.Blocks {
		out = append(out, b.Key)
	}
	return out
}

func listKeys(t testing.TB, b segment.Blobs, prefix string) []string {
	t.Helper()
	infos, err := b.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, i := range infos {
		out = append(out, i.Key)
	}
	return out
}

func sorted(keys ...[]string) []string {
	out := []string{}
	for _, k := range keys {
		out = append(out, k...)
	}
	slices.Sort(out)
	return out
}

// newStore returns a store over a FaultyBlobs over an in-memory bucket.
func NewStore(t testing.TB, cfg segment.Config) (*segment.Store, *segmenttest.FaultyBlobs) {
	f := segmenttest.NewFaulty(segmenttest.NewMem(t))
	return segment.NewStore(f, cfg, func() time.Time { return epoch }), f
}
