package compaction

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// Phases of a verification (segment.VerificationError.Phase and the phase
// label of compactor_verification_failures_total).
const (
	VerifyPhaseCompaction = "compaction" // the read-back check before a commit
	VerifyPhaseVerify     = "verify"     // a verify job
	VerifyPhaseScrub      = "scrub"      // the background scrub
)

var verifyPhases = []string{VerifyPhaseCompaction, VerifyPhaseVerify, VerifyPhaseScrub}

// verifyMetrics are the verification series; nil fields without
// WithRegisterer.
type verifyMetrics struct {
	failures *prometheus.CounterVec
	runs     *prometheus.CounterVec
	bytes    *prometheus.CounterVec
}

func newVerifyMetrics(reg prometheus.Registerer) verifyMetrics {
	f := promauto.With(reg)
	m := verifyMetrics{
		failures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "compactor_verification_failures_total",
			Help: "Verifications that found a version, or the blocks a compaction wrote, not holding what their manifest or the compaction says, by phase (compaction: the read-back check before a commit, which then fails; verify: a verify job; scrub: the background scrub). Any increase needs an operator: the job's error names the collection, the version and the blob.",
		}, []string{"phase"}),
		runs: f.NewCounterVec(prometheus.CounterOpts{
			Name: "compactor_verifications_total",
			Help: "Versions verified by a verify job or the scrub, whatever the outcome, by phase.",
		}, []string{"phase"}),
		bytes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "compactor_verification_read_bytes_total",
			Help: "Bytes of blobs read by verify jobs and the scrub, by phase.",
		}, []string{"phase"}),
	}
	for _, p := range verifyPhases {
		m.failures.WithLabelValues(p)
		if p != VerifyPhaseCompaction {
			m.runs.WithLabelValues(p)
			m.bytes.WithLabelValues(p)
		}
	}
	return m
}

// noteVerification counts and logs err when it is a failed verification of
// collectionID.
func (c *Compactor) noteVerification(collectionID string, err error) {
	var ve *segment.VerificationError
	if !errors.As(err, &ve) {
		return
	}
	if c.verifym.failures != nil {
		c.verifym.failures.WithLabelValues(ve.Phase).Inc()
	}
	c.logger.Error("verification failed", "phase", ve.Phase, "collection", collectionID, "version", ve.Version, "err", err)
}

// VerifyOptions are the settings of one Compactor.Verify.
type VerifyOptions struct {
	// Version is the version to verify; 0: the collection's current one.
	// It must be kept (listed by the catalog's versions).
	Version int64
	// Replay also re-materializes the version from the previous kept
	// version plus the log between their compaction offsets, and compares
	// the digests.
	Replay bool
	// Phase is VerifyPhaseVerify (default) or VerifyPhaseScrub: the label
	// a failure counts under.
	Phase string
	// OnBlob, when set, is called after each blob read with its size in
	// bytes (progress, and a rate limit: it may wait); an error it returns
	// ends Verify.
	OnBlob func(ctx context.Context, kind, key string, bytes int64) error
	// OnManifest, when set, is called once the version's manifest is read,
	// with the number of blobs to read after it.
	OnManifest func(blobs int)
	// OnLog, when set, is called after each batch of log records the
	// replay reads, with the records read so far and the slice's size.
	OnLog func(read, total int64)
}

// VerifyResult is what Compactor.Verify checked.
type VerifyResult struct {
	segment.VerifyReport
	// Replay: whether the version was re-materialized (ReplayNote says why
	// not otherwise), from which version and over which log offsets, and
	// the digest and record count it gave.
	Replayed       bool
	ReplayFrom     int64
	ReplayOffsets  [2]int64 // (from, to]
	ReplayDigest   segment.Digest
	ReplayRecords  int64
	ReplayNote     string
	OpRecordsRead  int64
	CompactedUpTo  int64 // the version's compaction offset
	KeptVersions   []int64
	VersionCurrent bool
}

// Note is a one-line summary of what was checked and what was not (for a
// job's note): "verified version 3: 12 blocks, 1 delta, 2 index blobs,
// 1,000 records, digest …; replayed from version 2 over log offsets (10, 20]".
func (r VerifyResult) Note() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verified version %d: %d blocks, %d deltas, %d index blobs, %d records, digest %s",
		r.Version, r.Blocks, r.Deltas, r.IndexBlobs, r.Records, r.Digest)
	switch {
	case !r.DigestRecorded && r.Unrecorded > 0:
		fmt.Fprintf(&b, " (no digests recorded for %d blobs written before digests: checked for structure, counts and ids)", r.Unrecorded)
	case !r.DigestRecorded:
		b.WriteString(" (no version digest recorded)")
	case r.Unrecorded > 0:
		fmt.Fprintf(&b, " (%d blobs without a digest or checksum recorded)", r.Unrecorded)
	}
	switch {
	case r.Replayed:
		fmt.Fprintf(&b, "; replayed from version %d over log offsets (%d, %d]: %d operation records, digests equal",
			r.ReplayFrom, r.ReplayOffsets[0], r.ReplayOffsets[1], r.OpRecordsRead)
	case r.ReplayNote != "":
		b.WriteString("; not replayed: " + r.ReplayNote)
	}
	return b.String()
}

// Verify checks a kept version of collectionID (segment.Store.Verify: every
// blob re-read, checksums, digests, counts and the manifest) and, with
// VerifyOptions.Replay, re-materializes it from the previous kept version
// and the log between them. It holds one block, the version's deltas and
// the replay's sorted runs (spilled past Config.MemoryBytes) in memory.
//
// Errors: catalog.ErrNotFound (no such collection, or the version is not
// kept: the message names the kept ones); a *segment.VerificationError of
// the phase (matching segment.ErrVerification) when the version fails,
// naming each blob that is wrong, counted in
// compactor_verification_failures_total; storage errors (transient) and
// ctx's. The result holds what was checked either way.
func (c *Compactor) Verify(ctx context.Context, collectionID string, opts VerifyOptions) (res VerifyResult, err error) {
	phase := opts.Phase
	if phase == "" {
		phase = VerifyPhaseVerify
	}
	defer func() {
		if c.verifym.runs != nil && res.ManifestKey != "" {
			c.verifym.runs.WithLabelValues(phase).Inc()
			c.verifym.bytes.WithLabelValues(phase).Add(float64(res.BytesRead))
		}
		c.noteVerification(collectionID, err)
	}()
	coll, err := c.cat.GetCollection(ctx, collectionID)
	if err != nil {
		return res, fmt.Errorf("verify %s: %w", collectionID, err)
	}
	versions, err := c.cat.ListVersions(ctx, collectionID)
	if err != nil {
		return res, fmt.Errorf("verify %s: list versions: %w", collectionID, err)
	}
	slices.SortFunc(versions, func(a, b catalog.Version) int { return cmp.Compare(a.Version, b.Version) })
	var kept []catalog.Version
	for _, v := range versions {
		if v.RetiredAt.IsZero() || v.Version == coll.SegmentVersion {
			kept = append(kept, v)
			res.KeptVersions = append(res.KeptVersions, v.Version)
		}
	}
	want := opts.Version
	if want == 0 {
		want = coll.SegmentVersion
	}
	if want == 0 {
		return res, fmt.Errorf("verify %s: the collection has no segment version yet (nothing compacted): %w", collectionID, catalog.ErrNotFound)
	}
	i := slices.IndexFunc(kept, func(v catalog.Version) bool { return v.Version == want })
	if i < 0 {
		return res, fmt.Errorf("verify %s: version %d is not kept (kept: %s): %w", collectionID, want, joinVersions(res.KeptVersions), catalog.ErrNotFound)
	}
	v := kept[i]
	res.VersionCurrent = v.Version == coll.SegmentVersion
	res.CompactedUpTo = v.CompactionOffset
	// This process's GC keeps the version while it is read.
	defer c.pins.pin(collectionID, v.ManifestKey, false)()
	rep, err := c.seg.Verify(ctx, v.ManifestKey, segment.VerifyOptions{OnBlob: opts.OnBlob, OnManifest: opts.OnManifest})
	// A manifest that does not decode names no version: the catalog's row
	// does (the error and the job's row name it).
	rep.Version = cmp.Or(rep.Version, v.Version)
	res.VerifyReport = rep
	if err != nil {
		return res, fmt.Errorf("verify %s version %d: %w", collectionID, v.Version, classifyRead(err))
	}
	// The catalog's copy of the digest, written by the commit, against
	// the manifest's.
	if v.Digest != "" && rep.DigestRecorded {
		if d, err := segment.ParseDigest(v.Digest); err != nil || d != rep.Digest {
			res.Problems = append(res.Problems, segment.Problem{Kind: segment.KindManifest, Key: v.ManifestKey,
				What: fmt.Sprintf("the catalog records digest %s for version %d, its records digest to %s", v.Digest, v.Version, rep.Digest)})
		}
	}
	if len(res.Problems) == 0 && opts.Replay {
		var prev *catalog.Version
		if i > 0 {
			prev = &kept[i-1]
		}
		if err := c.replay(ctx, collectionID, prev, v, &res, opts); err != nil {
			return res, err
		}
	}
	verr := res.Err(phase)
	problem := ""
	if verr != nil {
		problem = verr.Error()
	}
	// Recorded with a context of its own: the outcome is known.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.CommitTimeout)
	defer cancel()
	if err := c.cat.RecordVerification(rctx, collectionID, v.Version, problem); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		c.logger.Warn("record verification", "collection", collectionID, "version", v.Version, "err", err)
	}
	return res, verr
}

func joinVersions(vs []int64) string {
	if len(vs) == 0 {
		return "none"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}

// replay re-materializes version v from prev (nil: from no records, when
// v's log slice starts at offset 0) and the log (prev's offset, v's
// offset], and adds a problem to res when the digests or record counts
// differ. A version it cannot replay (no previous kept version, log rows
// purged, a version whose offset does not follow prev's, as a rollback's)
// gets a ReplayNote, not a problem.
func (c *Compactor) replay(ctx context.Context, collectionID string, prev *catalog.Version, v catalog.Version, res *VerifyResult, opts VerifyOptions) error {
	from := int64(0)
	if prev != nil {
		from = prev.CompactionOffset
	}
	to := v.CompactionOffset
	switch {
	case prev == nil && v.Version > 1:
		res.ReplayNote = fmt.Sprintf("no kept version before version %d to replay from", v.Version)
		return nil
	case to < from:
		res.ReplayNote = fmt.Sprintf("version %d's compaction offset %d precedes version %d's %d (a rollback): nothing to replay", v.Version, to, prev.Version, from)
		return nil
	}
	// The log slice must be whole: offsets are consecutive, so its first
	// row is from+1.
	if to > from {
		first := int64(-1)
		if _, err := c.cat.ScanKeptLog(ctx, collectionID, from, to, 1, func(off int64, _ []byte) error { first = off; return nil }); err != nil {
			return fmt.Errorf("verify %s: replay: read log: %w", collectionID, err)
		}
		if first != from+1 {
			res.ReplayNote = fmt.Sprintf("log offsets (%d, %d] are purged (the log keeps only the rows after the oldest kept version's compaction offset)", from, to)
			return nil
		}
	}
	var base *segment.Manifest
	var digest segment.Digest
	var records int64
	if prev != nil {
		defer c.pins.pin(collectionID, prev.ManifestKey, false)()
		m, err := c.seg.ReadManifest(ctx, prev.ManifestKey)
		if err != nil {
			return fmt.Errorf("verify %s: replay: read manifest of version %d: %w", collectionID, prev.Version, classifyRead(err))
		}
		base = m
		records = m.RecordCount
		if digest, err = segment.ParseDigest(m.Digest); err != nil {
			// No digest recorded: the records of the version, read.
			digest, records = segment.Digest{}, 0
			if err := c.seg.ScanUncached(ctx, m, func(r materialize.Record) bool {
				digest = digest.Add(segment.RecordHash(&r))
				records++
				return true
			}); err != nil {
				return fmt.Errorf("verify %s: replay: read version %d: %w", collectionID, prev.Version, classifyRead(err))
			}
		}
	}
	runs := &runSet{dir: c.cfg.SpillDir, budget: c.cfg.MemoryBytes / 4}
	defer runs.close()
	if to > from {
		if err := c.readRunsFrom(ctx, c.cat.ScanKeptLog, collectionID, from, to, runs, nil, func(n int) {
			res.OpRecordsRead += int64(n)
			if opts.OnLog != nil {
				opts.OnLog(res.OpRecordsRead, to-from)
			}
		}); err != nil {
			return fmt.Errorf("verify %s: replay: %w", collectionID, err)
		}
	}
	// Per record id of the slice: minus its record in prev, plus its record
	// after the operation records, looked up a batch of ids at a time.
	const batch = 512
	var pending []segment.Change
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		cur := map[string]materialize.Record{}
		if base != nil {
			ids := make([]string, len(pending))
			for i, ch := range pending {
				ids[i] = ch.ID
			}
			var err error
			if cur, err = c.seg.Get(ctx, base, ids); err != nil {
				return fmt.Errorf("verify %s: replay: read version %d: %w", collectionID, prev.Version, classifyRead(err))
			}
		}
		for _, ch := range pending {
			var old *materialize.Record
			if r, ok := cur[ch.ID]; ok {
				old = &r
				digest = digest.Sub(segment.RecordHash(old))
				records--
			}
			if r := materialize.ApplyOwning(old, ch.Ops); r != nil {
				digest = digest.Add(segment.RecordHash(r))
				records++
			}
		}
		pending = pending[:0]
		return nil
	}
	for ch, err := range changesOf(ctx, runs) {
		if err != nil {
			return fmt.Errorf("verify %s: replay: %w", collectionID, err)
		}
		pending = append(pending, ch)
		if len(pending) == batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	res.Replayed = true
	res.ReplayFrom = 0
	if prev != nil {
		res.ReplayFrom = prev.Version
	}
	res.ReplayOffsets = [2]int64{from, to}
	res.ReplayDigest, res.ReplayRecords = digest, records
	if digest != res.Digest || records != res.Records {
		res.Problems = append(res.Problems, segment.Problem{Kind: segment.KindManifest, Key: v.ManifestKey,
			What: fmt.Sprintf("replayed from version %d over log offsets (%d, %d]: %d records digesting to %s, the version holds %d digesting to %s",
				res.ReplayFrom, from, to, records, digest, res.Records, res.Digest)})
	}
	return nil
}
