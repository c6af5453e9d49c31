package compaction

import (
	"context"
	"errors"
	"fmt"

	"github.com/compactorhq/compactor/internal/catalog"
	"github.com/compactorhq/compactor/internal/segment"
)

// repairBase returns the version a compaction of coll builds on instead
// of the current one, or nil to build on the current one as usual: when
// the current version's last verification failed (a verify job or the
// scrub recorded a problem), the newest earlier kept version that is not
// marked failing, whose log slice up to now is still stored (the log keeps
// the rows kept versions need), and that verifies now (every blob re-read:
// it may share the damaged blob). The compaction then re-materializes the
// log from that version's compaction offset, so the blocks the damaged
// version holds are rewritten from the last good version and the log. A
// candidate that fails its verification is marked so and the next older
// one tried; with none, nil (the compaction proceeds on the current
// version and fails where it meets the damage). Errors: the catalog's and
// the blob store's (transient), ctx's.
func (c *Compactor) repairBase(ctx context.Context, coll catalog.Collection) (*catalog.Version, error) {
	if coll.SegmentVersion == 0 {
		return nil, nil
	}
	versions, err := c.cat.ListVersions(ctx, coll.ID)
	if err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	cur := -1
	for i, v := range versions {
		if v.Version == coll.SegmentVersion {
			cur = i
		}
	}
	if cur < 0 || versions[cur].VerifyError == "" {
		return nil, nil
	}
	// versions is newest first.
	for i := range versions {
		v := versions[i]
		if v.Version >= coll.SegmentVersion || !v.RetiredAt.IsZero() || v.VerifyError != "" || v.CompactionOffset > coll.CompactionOffset {
			continue
		}
		if v.CompactionOffset < coll.CompactionOffset {
			first := int64(-1)
			if _, err := c.cat.ScanKeptLog(ctx, coll.ID, v.CompactionOffset, coll.CompactionOffset, 1, func(off int64, _ []byte) error { first = off; return nil }); err != nil {
				return nil, fmt.Errorf("read log: %w", err)
			}
			if first != v.CompactionOffset+1 {
				continue // the log after it is purged: older ones are too
			}
		}
		unpin := c.pins.pin(coll.ID, v.ManifestKey, false)
		rep, err := c.seg.Verify(ctx, v.ManifestKey, segment.VerifyOptions{})
		unpin()
		if err != nil {
			return nil, fmt.Errorf("verify version %d to rebuild from: %w", v.Version, classifyRead(err))
		}
		problem := ""
		if verr := rep.Err(VerifyPhaseCompaction); verr != nil {
			problem = verr.Error()
		}
		if err := c.cat.RecordVerification(ctx, coll.ID, v.Version, problem); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			return nil, fmt.Errorf("record verification of version %d: %w", v.Version, err)
		}
		if problem != "" {
			c.logger.Warn("version to rebuild from fails verification", "collection", coll.ID, "version", v.Version, "err", problem)
			continue
		}
		c.logger.Info("rebuilding a version that failed verification", "collection", coll.ID, "version", coll.SegmentVersion, "from_version", v.Version)
		return &v, nil
	}
	c.logger.Warn("no good version to rebuild a version that failed verification from", "collection", coll.ID, "version", coll.SegmentVersion)
	return nil, nil
}
