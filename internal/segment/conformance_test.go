package segment_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
	"github.com/compactorhq/compactor/internal/segment/segmenttest"
)

// backends are the blob stores the product opens by URL: a directory, memory,
// and a real S3-compatible server (VersityGW, started by the test; skipped
// with the reason when its binary is absent, failed under CI=true).
var backends = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"file", func(t *testing.T) string { return "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "blobs")) }},
	{"mem", func(*testing.T) string { return "mem://" }},
	{"s3 (versitygw)", func(t *testing.T) string { return segmenttest.StartVersityGW(t) }},
}

// openBackend opens a fresh, empty bucket of the backend, closed when the
// test ends.
func openBackend(t *testing.T, url func(t *testing.T) string) segment.Blobs {
	t.Helper()
	b, closer, err := segment.OpenBucket(context.Background(), url(t))
	if err != nil {
		t.Fatalf("open bucket: %v", err)
	}
	t.Cleanup(func() {
		if err := closer.Close(); err != nil {
			t.Errorf("close bucket: %v", err)
		}
	})
	return b
}

func TestBlobsConformance(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			segmenttest.Conformance(t, openBackend(t, be.url))
		})
	}
}

// TestStoreRoundTripOnEveryBackend writes segment versions by copy-on-write
// on each backend, reads them back, and collects garbage: what the
// compactor does with its blob store, with real modification times.
func TestStoreRoundTripOnEveryBackend(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			blobs := openBackend(t, be.url)
			// GC runs an hour ahead of the blobs' real times, so every blob
			// is past a 30-minute grace.
			now := func() time.Time { return time.Now().Add(time.Hour) }
			cfg := segment.Config{MaxBlockRecords: 100, MinBlockRecords: 25}
			s := segment.NewStore(blobs, cfg, now)
			rng := rand.New(rand.NewPCG(9, 9))

			recs := records(rng, "k%04d", 1000, 8)
			v1, _, key1 := commit(t, s, nil, upserts(recs))
			// Version 2 rewrites one block's worth of ids.
			changed := records(rng, "k%04d", 1000, 8)[300:350]
			v2, stats, key2 := commit(t, s, v1, upserts(changed))
			if stats.BlocksWritten >= len(v1.Blocks) {
				t.Errorf("version 2 wrote %d of %d blocks: copy-on-write rewrote everything", stats.BlocksWritten, len(v1.Blocks))
			}
			want := append(append(append([]materialize.Record{}, recs[:300]...), changed...), recs[350:]...)

			m, err := s.ReadManifest(ctx, key2)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m, v2) {
				t.Fatalf("manifest read back differs from the one written")
			}
			if got := checkManifest(t, s, m, cfg); !reflect.DeepEqual(got, want) {
				t.Fatalf("version 2 holds %d records, not the %d written", len(got), len(want))
			}
			got, err := s.Get(ctx, m, []string{"k0310", "k0999", "nope"})
			if err != nil || len(got) != 2 || !reflect.DeepEqual(got["k0310"], changed[10]) {
				t.Fatalf("Get: %d records, %v", len(got), err)
			}

			// GC keeping version 2 only: version 1's manifest and the
			// blocks only it references go; version 2 reads the same.
			st, err := s.GC(ctx, testCollection, segment.GCPlan{Keep: []string{key2}, Expired: []string{key1}, OrphanGrace: 30 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if st.BlobsDeleted == 0 {
				t.Errorf("GC deleted nothing: %+v", st)
			}
			if _, err := s.ReadManifest(ctx, key1); err == nil {
				t.Error("version 1's manifest survived GC")
			}
			if got := checkManifest(t, s, m, cfg); !reflect.DeepEqual(got, want) {
				t.Fatal("version 2 changed with GC")
			}
			if err := s.DeleteCollection(ctx, testCollection); err != nil {
				t.Fatal(err)
			}
			if keys := listKeys(t, blobs, "collections/"); len(keys) != 0 {
				t.Errorf("blobs left after DeleteCollection: %v", keys)
			}
		})
	}
}

// TestOpenBucketS3ChecksTheBucketAtOnce: a missing bucket or wrong
// credentials fail OpenBucket with an error naming the bucket (and not the
// URL's query), instead of the first compaction.
func TestOpenBucketS3ChecksTheBucketAtOnce(t *testing.T) {
	good := segmenttest.StartVersityGW(t)
	ctx := context.Background()
	missing := strings.Replace(good, "s3://compactor-test?", "s3://no-such-bucket?", 1)
	if _, _, err := segment.OpenBucket(ctx, missing); err == nil || !strings.Contains(err.Error(), "s3://no-such-bucket") || strings.Contains(err.Error(), "endpoint") {
		t.Errorf("OpenBucket of a missing bucket: %v; want an error naming s3://no-such-bucket without the query", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	if _, _, err := segment.OpenBucket(ctx, good); err == nil {
		t.Error("OpenBucket with a wrong secret succeeded")
	} else {
		t.Logf("wrong secret: %v", err)
	}
}
