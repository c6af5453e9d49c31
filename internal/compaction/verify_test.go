package compaction

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// flippingBlobs stores block blobs with one byte flipped while armed.
type flippingBlobs struct {
	segment.Blobs
	armed atomic.Bool
}

func (f *flippingBlobs) Put(ctx context.Context, key string, data []byte) error {
	if f.armed.Load() && strings.Contains(key, "/blocks/") {
		data = slices.Clone(data)
		data[len(data)/2] ^= 0x10
	}
	return f.Blobs.Put(ctx, key, data)
}

// keptLog is a catalog whose log is never purged: the log rows of every
// version stay, as they do for kept versions.
type keptLog struct{ Catalog }

func (keptLog) PurgeLog(context.Context, string) (int64, error) { return 0, nil }

func verificationFailures(t *testing.T, e *corruptEnv, phase string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "compactor_verification_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == phase {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no compactor_verification_failures_total{phase=%q}", phase)
	return 0
}

// A compaction whose blocks do not read back as written fails, not
// transiently, naming the block; it commits nothing (the previous version
// stays current, the blobs it wrote are removed) and counts in
// compactor_verification_failures_total{phase="compaction"}.
func TestACompactionWhoseBlocksDoNotReadBackFailsAndCommitsNothing(t *testing.T) {
	e := newCorruptEnv(t)
	flip := &flippingBlobs{Blobs: e.blobs}
	e.seg = segment.NewStore(flip, segment.Config{MaxBlockRecords: 8}, nil)
	var err error
	e.reg = prometheus.NewRegistry()
	if e.comp, err = New(e.cat, e.seg, DefaultConfig(), nil, WithRegisterer(e.reg)); err != nil {
		t.Fatal(err)
	}
	id := e.collection("flips", 20)
	before, _ := e.manifest(id)
	blobsBefore, err := e.blobs.List(e.ctx, "collections/"+id+"/")
	if err != nil {
		t.Fatal(err)
	}
	flip.armed.Store(true)
	_, err = e.comp.Compact(e.ctx, id, Options{})
	var ve *segment.VerificationError
	if !errors.As(err, &ve) || ve.Phase != VerifyPhaseCompaction || IsTransient(err) ||
		!strings.Contains(err.Error(), "verification failed") || !strings.Contains(err.Error(), "/blocks/") || !strings.Contains(err.Error(), id) {
		t.Fatalf("compaction: %v, want a non-transient verification failure naming the block", err)
	}
	if after, _ := e.manifest(id); after != before {
		t.Errorf("current manifest %s, want still %s", after, before)
	}
	if blobs, err := e.blobs.List(e.ctx, "collections/"+id+"/"); err != nil || len(blobs) != len(blobsBefore) {
		t.Errorf("%d blobs after the failed compaction (%v), want the %d of before", len(blobs), err, len(blobsBefore))
	}
	if got := verificationFailures(t, e, VerifyPhaseCompaction); got != 1 {
		t.Errorf("compaction failures counted %v, want 1", got)
	}
	// Once the store stores what it is given, the compaction succeeds.
	flip.armed.Store(false)
	if res, err := e.comp.Compact(e.ctx, id, Options{}); err != nil || res.VersionAfter != 2 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	if problems, err := testutil.GatherAndLint(e.reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestVerifyChecksAKeptVersionAndReplaysItFromTheLog(t *testing.T) {
	e := newCorruptEnv(t)
	var err error
	e.reg = prometheus.NewRegistry()
	if e.comp, err = New(keptLog{e.cat}, e.seg, DefaultConfig(), nil, WithRegisterer(e.reg)); err != nil {
		t.Fatal(err)
	}
	id := e.collection("replayed", 20) // version 1: c-000..c-019; c-020 in the log
	// Updates, a delete and an ADD of an id present (ignored) after it.
	if _, _, err := e.cat.AppendLog(e.ctx, id, []materialize.OperationRecord{
		{Op: materialize.OpUpsert, ID: "c-003", Embedding: []float32{33}},
		{Op: materialize.OpDelete, ID: "c-004"},
		{Op: materialize.OpAdd, ID: "c-005", Embedding: []float32{55}},
		{Op: materialize.OpUpdate, ID: "c-006", Metadata: materialize.Metadata{"k": "v"}},
	}, catalog.AppendLimits{}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.comp.Compact(e.ctx, id, Options{}); err != nil || res.VersionAfter != 2 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	for _, v := range []int64{0, 1, 2} {
		res, err := e.comp.Verify(e.ctx, id, VerifyOptions{Version: v, Replay: true})
		if err != nil {
			t.Fatalf("verify version %d: %v", v, err)
		}
		wantRecords := int64(20)
		if v != 1 {
			wantRecords = 20 // + c-020, - c-004
		}
		if !res.Replayed || res.Records != wantRecords || res.ReplayDigest != res.Digest || !res.DigestRecorded {
			t.Errorf("verify version %d: %+v, want it replayed to %d records", v, res, wantRecords)
		}
		if v != 1 && (res.ReplayFrom != 1 || res.OpRecordsRead != 5 || !res.VersionCurrent) {
			t.Errorf("verify version %d: replayed from %d, %d operation records, current %v", v, res.ReplayFrom, res.OpRecordsRead, res.VersionCurrent)
		}
		if !strings.Contains(res.Note(), "digests equal") {
			t.Errorf("note %q", res.Note())
		}
	}
	if _, err := e.comp.Verify(e.ctx, id, VerifyOptions{Version: 7}); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), "kept: 1, 2") {
		t.Errorf("verify of version 7: %v, want not found naming the kept versions", err)
	}

	// The log says something else than version 2 holds: the replay
	// disagrees, naming the version's manifest.
	db, err := sql.Open("sqlite", e.path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := materialize.OperationRecord{Op: materialize.OpUpsert, ID: "c-003", Embedding: []float32{34}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := db.ExecContext(e.ctx, `UPDATE log SET record = ? WHERE collection_id = ? AND log_offset = 22`, other, id); err != nil {
		t.Fatal(err)
	} else if n, _ := r.RowsAffected(); n != 1 {
		t.Fatalf("%d log rows changed, want 1", n)
	}
	key, _ := e.manifest(id)
	res, err := e.comp.Verify(e.ctx, id, VerifyOptions{Replay: true})
	var ve *segment.VerificationError
	if !errors.As(err, &ve) || ve.Phase != VerifyPhaseVerify || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "replayed from version 1") {
		t.Fatalf("verify: %v, want a replay mismatch naming %s", err, key)
	}
	if res.Replayed != true || res.ReplayDigest == res.Digest {
		t.Errorf("result %+v", res)
	}
	// The catalog keeps the digest the commit recorded and the outcome of
	// the last verification of each version.
	vs, err := e.cat.ListVersions(e.ctx, id)
	if err != nil || len(vs) != 2 {
		t.Fatalf("versions: %v %v", vs, err)
	}
	if vs[0].Digest != res.Digest.String() || vs[0].VerifiedAt.IsZero() || !strings.Contains(vs[0].VerifyError, "replayed from version 1") {
		t.Errorf("version 2 row: digest %q (want %s), verified at %v, error %q", vs[0].Digest, res.Digest, vs[0].VerifiedAt, vs[0].VerifyError)
	}
	if vs[1].VerifiedAt.IsZero() || vs[1].VerifyError != "" {
		t.Errorf("version 1 row: verified at %v, error %q", vs[1].VerifiedAt, vs[1].VerifyError)
	}
	// Without the replay the version's own blobs are fine.
	if _, err := e.comp.Verify(e.ctx, id, VerifyOptions{}); err != nil {
		t.Errorf("verify without replay: %v", err)
	}
	if got := verificationFailures(t, e, VerifyPhaseVerify); got != 1 {
		t.Errorf("verify failures counted %v, want 1", got)
	}
}

func TestVerifyFindsADamagedBlockAndSaysWhenItCannotReplay(t *testing.T) {
	e := newCorruptEnv(t)
	id := e.collection("damaged", 20)
	res, err := e.comp.Verify(e.ctx, id, VerifyOptions{Replay: true, Phase: VerifyPhaseScrub})
	if err != nil || res.Replayed || !strings.Contains(res.ReplayNote, "purged") {
		t.Fatalf("verify: %+v %v, want it verified and not replayed (the log is purged)", res, err)
	}
	_, m := e.manifest(id)
	k := m.Blocks[1].Key
	data, err := e.blobs.Get(e.ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-20] ^= 0xff
	if err := e.blobs.Put(e.ctx, k, data); err != nil {
		t.Fatal(err)
	}
	_, err = e.comp.Verify(e.ctx, id, VerifyOptions{Phase: VerifyPhaseScrub})
	var ve *segment.VerificationError
	if !errors.As(err, &ve) || ve.Phase != VerifyPhaseScrub || ve.Problems[0].Key != k || IsTransient(err) {
		t.Fatalf("verify: %v, want a verification failure naming %s", err, k)
	}
	if got := verificationFailures(t, e, VerifyPhaseScrub); got != 1 {
		t.Errorf("scrub failures counted %v, want 1", got)
	}
}

// A version that failed verification is rebuilt by the next compaction
// from the newest earlier kept version that verifies and the log after it:
// the damaged block is rewritten, the view is whole again, and the new
// version verifies.
func TestTheNextCompactionRebuildsAVersionThatFailedVerification(t *testing.T) {
	e := newCorruptEnv(t)
	var err error
	e.reg = prometheus.NewRegistry()
	if e.comp, err = New(keptLog{e.cat}, e.seg, DefaultConfig(), nil, WithRegisterer(e.reg)); err != nil {
		t.Fatal(err)
	}
	id := e.collection("repaired", 20) // version 1: c-000..c-019; c-020 in the log
	if _, _, err := e.cat.AppendLog(e.ctx, id, []materialize.OperationRecord{
		{Op: materialize.OpUpsert, ID: "c-001", Embedding: []float32{11}},
		{Op: materialize.OpDelete, ID: "c-009"},
	}, catalog.AppendLimits{}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.comp.Compact(e.ctx, id, Options{}); err != nil || res.VersionAfter != 2 {
		t.Fatalf("compaction: %+v %v", res, err)
	}
	want, err := e.comp.ListRecords(e.ctx, id, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	// Damage the block version 2 wrote for c-001 (version 1 does not share
	// it), found by the scrub.
	_, m2 := e.manifest(id)
	_, m1 := func() (string, *segment.Manifest) {
		vs, _ := e.cat.ListVersions(e.ctx, id)
		m, err := e.seg.ReadManifest(e.ctx, vs[1].ManifestKey)
		if err != nil {
			t.Fatal(err)
		}
		return vs[1].ManifestKey, m
	}()
	k := m2.Blocks[0].Key
	if m1.References(k) {
		t.Fatalf("precondition: block %s is version 1's too", k)
	}
	data, err := e.blobs.Get(e.ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x20
	if err := e.blobs.Put(e.ctx, k, data); err != nil {
		t.Fatal(err)
	}
	if _, err := e.comp.Verify(e.ctx, id, VerifyOptions{Phase: VerifyPhaseScrub}); !errors.Is(err, segment.ErrVerification) {
		t.Fatalf("scrub: %v, want a verification failure", err)
	}
	// The next compaction, with one more record.
	if _, _, err := e.cat.AppendLog(e.ctx, id, []materialize.OperationRecord{{Op: materialize.OpUpsert, ID: "c-050", Embedding: []float32{50}}}, catalog.AppendLimits{}); err != nil {
		t.Fatal(err)
	}
	res, err := e.comp.Compact(e.ctx, id, Options{})
	if err != nil || res.VersionAfter != 3 || res.OffsetStart != 20 || !strings.Contains(res.Note, "version 2 failed verification: rebuilt from version 1") {
		t.Fatalf("compaction: %+v %v, want version 3 rebuilt from version 1 and the log after offset 20", res, err)
	}
	got, err := e.comp.ListRecords(e.ctx, id, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs, gotIDs := []string{}, []string{}
	for _, r := range want.Records {
		wantIDs = append(wantIDs, r.ID)
	}
	wantIDs = append(wantIDs, "c-050")
	for _, r := range got.Records {
		gotIDs = append(gotIDs, r.ID)
	}
	if !slices.Equal(gotIDs, wantIDs) || got.Records[1].Embedding[0] != 11 {
		t.Errorf("records after the rebuild %v, want %v (c-001 updated)", gotIDs, wantIDs)
	}
	if _, m3 := e.manifest(id); m3.References(k) {
		t.Errorf("version 3 still lists the damaged block %s", k)
	}
	if vr, err := e.comp.Verify(e.ctx, id, VerifyOptions{Replay: true}); err != nil || !vr.Replayed {
		t.Errorf("verify of the rebuilt version: %+v %v", vr, err)
	}
}
