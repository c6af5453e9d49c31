package segment

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/compactorhq/compactor/internal/materialize"
)

// ErrVerification is matched (errors.Is) by a *VerificationError: a
// version, or blocks a compaction wrote, that do not hold what their
// manifest (or the compaction) says. Retrying does not mend it.
var ErrVerification = errors.New("verification failed")

// Problem is one thing a verification found wrong.
type Problem struct {
	Kind string // KindManifest, KindBlock, KindDelta or KindIndex
	Key  string // the blob's key, relative to the bucket
	What string // what is wrong, e.g. "digest 3f… recorded, records digest to 9a…"
}

func (p Problem) String() string { return p.Kind + " " + p.Key + ": " + p.What }

// maxProblemsShown bounds the problems a VerificationError's message names
// (the rest are counted): the message reaches clients and the page.
const maxProblemsShown = 3

// VerificationError is a failed verification of version Version of a
// collection: Problems, at least one, name each blob that is wrong and how.
// It matches ErrVerification.
type VerificationError struct {
	CollectionID string
	Version      int64
	// Phase is where it was found: "compaction" (the read-back check of a
	// compaction, before its commit), "verify" or "scrub".
	Phase    string
	Problems []Problem
}

func (e *VerificationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verification failed: collection %s version %d: ", e.CollectionID, e.Version)
	for i, p := range e.Problems {
		if i == maxProblemsShown {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		what := p.What
		if len(what) > maxCorruptDetail {
			what = strings.ToValidUTF8(what[:maxCorruptDetail], "") + "…"
		}
		b.WriteString(p.Kind + " " + p.Key + ": " + what)
	}
	return b.String()
}

// Is makes a VerificationError match ErrVerification.
func (e *VerificationError) Is(target error) bool { return target == ErrVerification }

// VerifyOptions are the settings of one Store.Verify.
type VerifyOptions struct {
	// OnBlob, when set, is called after each blob is read, with its kind,
	// key and size in bytes (progress, and a rate limit: it may wait). An
	// error it returns ends Verify with that error.
	OnBlob func(ctx context.Context, kind, key string, bytes int64) error
	// OnManifest, when set, is called once the manifest is read, with the
	// number of blobs Verify is to read after it (blocks, deltas, index
	// blobs).
	OnManifest func(blobs int)
}

// VerifyReport is what Store.Verify checked and found.
type VerifyReport struct {
	CollectionID string
	Version      int64
	ManifestKey  string
	// Blobs checked, by kind, and the bytes read (manifest included).
	Blocks, Deltas, IndexBlobs int
	BytesRead                  int64
	// Records is the version's records as read (deltas applied); Digest
	// their digest as recomputed from the blocks and deltas read.
	Records int64
	Digest  Digest
	// DigestRecorded: the manifest records a version digest (Verify then
	// compared it with Digest). Unrecorded counts the blocks, deltas and
	// index blobs whose manifest entry has no digest or checksum (written
	// before digests): they are checked for structure, counts and ids
	// only, which is not a failure.
	DigestRecorded bool
	Unrecorded     int
	// Problems are what is wrong; none: the version verified.
	Problems []Problem
}

// Err returns the report's problems as a *VerificationError of phase, or
// nil when there are none.
func (r *VerifyReport) Err(phase string) error {
	if len(r.Problems) == 0 {
		return nil
	}
	return &VerificationError{CollectionID: r.CollectionID, Version: r.Version, Phase: phase, Problems: r.Problems}
}

func (r *VerifyReport) problem(kind, key, format string, args ...any) {
	r.Problems = append(r.Problems, Problem{Kind: kind, Key: key, What: fmt.Sprintf(format, args...)})
}

// Verify re-reads every blob of the version whose manifest is at
// manifestKey, past the decoded block cache, and checks: the manifest's
// invariants (ReadManifest); each block's and delta's size, SHA-256
// checksum, structure (every size its file claims, see ReadBlock), record
// and tombstone counts, id range and order, and record digest against its
// manifest entry; each index blob's size and checksum; and the version's
// record count and digest against the records read, deltas applied. It
// holds one block and the version's deltas in memory at a time.
//
// Damage (a missing, undecodable or contradicting blob) is reported in
// VerifyReport.Problems, never as the error: the error is a failure to
// read (blob store unavailable), ctx's end, or VerifyOptions.OnBlob's.
// Entries without a digest or checksum (written before digests) are
// counted in Unrecorded and checked for the rest.
func (s *Store) Verify(ctx context.Context, manifestKey string, opts VerifyOptions) (VerifyReport, error) {
	rep := VerifyReport{CollectionID: collectionOfKey(manifestKey), ManifestKey: manifestKey}
	onBlob := func(kind, key string, n int64) error {
		rep.BytesRead += n
		if opts.OnBlob != nil {
			return opts.OnBlob(ctx, kind, key, n)
		}
		return nil
	}
	// damage reports err as a problem of the blob when it is damage, and
	// returns it otherwise.
	damage := func(kind, key string, err error) error {
		var ce *CorruptError
		var me *MissingError
		switch {
		case errors.As(err, &ce):
			rep.problem(kind, key, "%v", ce.Err)
		case errors.As(err, &me):
			rep.problem(kind, key, "missing from the blob store")
		default:
			return err
		}
		return nil
	}
	data, err := s.getBlob(ctx, KindManifest, manifestKey)
	if err != nil {
		return rep, damage(KindManifest, manifestKey, fmt.Errorf("read manifest %s: %w", manifestKey, err))
	}
	if err := onBlob(KindManifest, manifestKey, int64(len(data))); err != nil {
		return rep, err
	}
	m, err := decodeManifestAt(manifestKey, data)
	if err != nil {
		return rep, damage(KindManifest, manifestKey, err)
	}
	rep.CollectionID, rep.Version = m.CollectionID, m.Version
	if opts.OnManifest != nil {
		n := len(m.Blocks) + len(m.Deltas)
		if m.Index != nil {
			n += 1 + len(m.Index.Chunks)
		}
		opts.OnManifest(n)
	}

	// The deltas first: a read applies them over the blocks.
	var overlay []Change
	complete := true // every block and delta read and as recorded
	for _, d := range m.Deltas {
		cs, ok, err := s.verifyDelta(ctx, d, &rep, onBlob)
		if err != nil {
			return rep, err
		}
		if ok {
			overlay = mergeNewer(overlay, cs)
		} else {
			complete = false
		}
	}
	overridden := make(map[string]bool, len(overlay))
	for _, c := range overlay {
		overridden[c.ID] = true
	}
	var view Digest
	var records int64
	for _, b := range m.Blocks {
		recs, ok, err := s.verifyBlock(ctx, b, &rep, onBlob)
		if err != nil {
			return rep, err
		}
		if !ok {
			complete = false
			continue
		}
		for i := range recs {
			if len(overridden) > 0 && overridden[recs[i].ID] {
				continue
			}
			view = view.Add(RecordHash(&recs[i]))
			records++
		}
	}
	for _, c := range overlay {
		if c.Record != nil {
			view = view.Add(RecordHash(c.Record))
			records++
		}
	}
	rep.Records, rep.Digest = records, view
	if complete {
		if records != m.RecordCount {
			rep.problem(KindManifest, manifestKey, "record count %d recorded, the blocks and deltas hold %d", m.RecordCount, records)
		}
		if m.Digest != "" {
			rep.DigestRecorded = true
			if want, err := ParseDigest(m.Digest); err != nil {
				rep.problem(KindManifest, manifestKey, "%v", err)
			} else if want != view {
				rep.problem(KindManifest, manifestKey, "version digest %s recorded, the records read digest to %s", want, view)
			}
		}
	}
	if ix := m.Index; ix != nil {
		for _, ref := range append([]BlobRef{ix.Graph}, ix.Chunks...) {
			if err := s.verifyIndexBlob(ctx, ref, &rep, onBlob); err != nil {
				return rep, err
			}
		}
	}
	return rep, nil
}

// verifyBlob reads the blob at key for Verify and checks its checksum (when
// recorded); ok false: a problem was reported (or it is missing).
func (s *Store) verifyBlob(ctx context.Context, kind, key, checksum string, rep *VerifyReport, onBlob func(kind, key string, n int64) error) (data []byte, ok bool, err error) {
	data, err = s.getBlob(ctx, kind, key)
	if err != nil {
		if errors.Is(err, ErrNotExist) {
			rep.problem(kind, key, "missing from the blob store")
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("read %s %s: %w", kind, key, err)
	}
	if err := onBlob(kind, key, int64(len(data))); err != nil {
		return nil, false, err
	}
	if checksum == "" {
		return data, true, nil
	}
	if got := Checksum(data); got != checksum {
		rep.problem(kind, key, "SHA-256 %s recorded, the blob's is %s", checksum, got)
		return data, false, nil
	}
	return data, true, nil
}

func (s *Store) verifyBlock(ctx context.Context, b BlockRef, rep *VerifyReport, onBlob func(kind, key string, n int64) error) ([]materialize.Record, bool, error) {
	data, ok, err := s.verifyBlob(ctx, KindBlock, b.Key, b.Checksum, rep, onBlob)
	if err != nil || data == nil {
		return nil, false, err
	}
	rep.Blocks++
	recs, derr := decodeBlockOf(b, data)
	if derr != nil {
		var ce *CorruptError
		if errors.As(derr, &ce) {
			rep.problem(KindBlock, b.Key, "%v", ce.Err)
			return nil, false, nil
		}
		return nil, false, derr
	}
	if b.Digest == "" || b.Checksum == "" {
		rep.Unrecorded++
	}
	if b.Digest != "" {
		want, perr := ParseDigest(b.Digest)
		switch got := DigestOf(recs); {
		case perr != nil:
			rep.problem(KindBlock, b.Key, "%v", perr)
			ok = false
		case got != want:
			rep.problem(KindBlock, b.Key, "digest %s recorded, its %d records digest to %s", want, len(recs), got)
			ok = false
		}
	}
	if !ok {
		return nil, false, nil
	}
	return recs, true, nil
}

func (s *Store) verifyDelta(ctx context.Context, d DeltaRef, rep *VerifyReport, onBlob func(kind, key string, n int64) error) ([]Change, bool, error) {
	data, ok, err := s.verifyBlob(ctx, KindDelta, d.Key, d.Checksum, rep, onBlob)
	if err != nil || data == nil {
		return nil, false, err
	}
	rep.Deltas++
	cs, derr := decodeDeltaOf(d, data)
	if derr != nil {
		var ce *CorruptError
		if errors.As(derr, &ce) {
			rep.problem(KindDelta, d.Key, "%v", ce.Err)
			return nil, false, nil
		}
		return nil, false, derr
	}
	if d.Digest == "" || d.Checksum == "" {
		rep.Unrecorded++
	}
	var recs, tombs Digest
	for _, c := range cs {
		if c.Record != nil {
			recs = recs.Add(RecordHash(c.Record))
		} else {
			tombs = tombs.Add(tombstoneHash(c.ID))
		}
	}
	for _, f := range []struct {
		name, recorded string
		got            Digest
	}{{"digest", d.Digest, recs}, {"tombstone digest", d.TombstoneDigest, tombs}} {
		if f.recorded == "" {
			continue
		}
		if want, perr := ParseDigest(f.recorded); perr != nil {
			rep.problem(KindDelta, d.Key, "%s: %v", f.name, perr)
			ok = false
		} else if want != f.got {
			rep.problem(KindDelta, d.Key, "%s %s recorded, its rows digest to %s", f.name, want, f.got)
			ok = false
		}
	}
	if !ok {
		return nil, false, nil
	}
	return cs, true, nil
}

func (s *Store) verifyIndexBlob(ctx context.Context, ref BlobRef, rep *VerifyReport, onBlob func(kind, key string, n int64) error) error {
	data, ok, err := s.verifyBlob(ctx, KindIndex, ref.Key, ref.Checksum, rep, onBlob)
	if err != nil || data == nil {
		return err
	}
	rep.IndexBlobs++
	if ref.Checksum == "" {
		rep.Unrecorded++
	}
	if ok && int64(len(data)) != ref.Bytes {
		rep.problem(KindIndex, ref.Key, "%d bytes, the manifest says %d", len(data), ref.Bytes)
	}
	return nil
}
