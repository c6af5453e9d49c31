package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
	"github.com/compactorhq/compactor/internal/segment"
)

// The digest of docs/storage.md ("Digests"), recomputed by the Python
// program there: a second implementation agrees with this one.
func TestDigestIsTheDocumentedEncoding(t *testing.T) {
	doc := "hi"
	r1 := materialize.Record{ID: "a", Embedding: []float32{1, -0.5}, Document: &doc,
		Metadata: materialize.Metadata{"n": 1.5, "b": true, "s": "x"}}
	r2 := materialize.Record{ID: "b"}
	for _, tc := range []struct {
		name string
		got  segment.Digest
		want string
	}{
		{"record a", segment.RecordHash(&r1), "fd7d17c13f21ea4a27f374e7a7321484"},
		{"record b", segment.RecordHash(&r2), "9b5dc0453bbe9f1687a6d0c209330f0f"},
		{"both", segment.DigestOf([]materialize.Record{r1, r2}), "98dad8067ae08960af9a45a9b0652393"},
		{"none", segment.DigestOf(nil), "00000000000000000000000000000000"},
	} {
		if tc.got.String() != tc.want {
			t.Errorf("%s: digest %s, want %s", tc.name, tc.got, tc.want)
		}
		back, err := segment.ParseDigest(tc.want)
		if err != nil || back != tc.got {
			t.Errorf("%s: ParseDigest(%s) = %v, %v", tc.name, tc.want, back, err)
		}
	}
	// Empty and absent metadata (and embeddings) hash alike; any change of
	// content does not.
	r3 := r2
	r3.Metadata, r3.Embedding = materialize.Metadata{}, []float32{}
	if segment.RecordHash(&r3) != segment.RecordHash(&r2) {
		t.Error("empty metadata and embedding hash unlike absent ones")
	}
	for name, edit := range map[string]func(*materialize.Record){
		"id":             func(r *materialize.Record) { r.ID = "a2" },
		"embedding":      func(r *materialize.Record) { r.Embedding = []float32{1, -0.25} },
		"document":       func(r *materialize.Record) { d := "hj"; r.Document = &d },
		"no document":    func(r *materialize.Record) { r.Document = nil },
		"metadata value": func(r *materialize.Record) { r.Metadata = materialize.Metadata{"n": 1.5, "b": false, "s": "x"} },
		"metadata type":  func(r *materialize.Record) { r.Metadata = materialize.Metadata{"n": "1.5", "b": true, "s": "x"} },
	} {
		r := r1.Clone()
		edit(&r)
		if segment.RecordHash(&r) == segment.RecordHash(&r1) {
			t.Errorf("a change of the %s leaves the hash as it was", name)
		}
	}
	for _, bad := range []string{"", "00", strings.Repeat("g", 32), strings.Repeat("0", 33)} {
		if _, err := segment.ParseDigest(bad); err == nil {
			t.Errorf("ParseDigest(%q) accepted", bad)
		}
	}
}

func TestDigestIsOrderIndependentAndAdditive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := records(rng, "id-%03d", 50, 4)
	d := segment.DigestOf(recs)
	shuffled := slices.Clone(recs)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if segment.DigestOf(shuffled) != d {
		t.Error("the digest depends on the order of the records")
	}
	if got := segment.DigestOf(recs[:20]).Add(segment.DigestOf(recs[20:])); got != d {
		t.Errorf("digest of two halves adds to %s, want %s", got, d)
	}
	if got := d.Sub(segment.RecordHash(&recs[7])); got != segment.DigestOf(slices.Delete(slices.Clone(recs), 7, 8)) {
		t.Errorf("subtracting a record's hash gives %s, not the digest without it", got)
	}
}

// writeVersions writes three versions (blocks, then an update and delete
// through blocks, then a delta) and returns their manifest keys with the
// records each holds.
func writeVersions(t *testing.T, s *segment.Store) (keys []string, views [][]materialize.Record) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	recs := records(rng, "id-%04d", 1000, 4)
	m1, _, k1 := commit(t, s, nil, upserts(recs))
	view := slices.Clone(recs)
	keys, views = append(keys, k1), append(views, slices.Clone(view))

	upd := newRecord(rng, "id-0100", 4)
	m2, _, k2 := commit(t, s, m1, []segment.Change{{ID: "id-0100", Record: &upd}, {ID: "id-0500"}})
	view[100] = upd
	view = slices.Delete(view, 500, 501)
	keys, views = append(keys, k2), append(views, slices.Clone(view))

	// A delta over many blocks.
	w := s.NewWriter(testCollection, m2)
	var changes []segment.Change
	for _, i := range []int{3, 303, 603, 700, 903} {
		if i == 700 {
			changes = append(changes, segment.Change{ID: view[i].ID})
			continue
		}
		r := newRecord(rng, view[i].ID, 4)
		changes = append(changes, segment.Change{ID: r.ID, Record: &r})
		view[i] = r
	}
	view = slices.Delete(view, 700, 701)
	m3, stats, err := w.WriteDelta(ctx, changes, 3, 4)
	if err != nil || stats.DeltasWritten != 1 {
		t.Fatalf("write delta: %v (%d deltas)", err, stats.DeltasWritten)
	}
	k3, _, err := w.WriteManifest(ctx, m3)
	if err != nil {
		t.Fatal(err)
	}
	keys, views = append(keys, k3), append(views, view)
	return keys, views
}

func TestEveryVersionWrittenVerifies(t *testing.T) {
	s, _ := NewStore(t, segment.Config{MaxBlockRecords: 100})
	keys, views := writeVersions(t, s)
	for i, key := range keys {
		rep, err := s.Verify(context.Background(), key, segment.VerifyOptions{})
		if err != nil {
			t.Fatalf("version %d: %v", i+1, err)
		}
		if err := rep.Err("verify"); err != nil {
			t.Errorf("version %d: %v", i+1, err)
		}
		if want := segment.DigestOf(views[i]); rep.Digest != want || !rep.DigestRecorded || rep.Records != int64(len(views[i])) {
			t.Errorf("version %d: digest %s of %d records (recorded %v), want %s of %d", i+1, rep.Digest, rep.Records, rep.DigestRecorded, want, len(views[i]))
		}
		if rep.Unrecorded != 0 || rep.Blocks != 10 || rep.BytesRead == 0 {
			t.Errorf("version %d: %d unrecorded, %d blocks, %d bytes read", i+1, rep.Unrecorded, rep.Blocks, rep.BytesRead)
		}
	}
}

// editManifest rewrites the manifest at key with edit applied.
func editManifest(t *testing.T, b segment.Blobs, key string, edit func(*segment.Manifest)) {
	t.Helper()
	ctx := context.Background()
	data, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var m segment.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if data, err = json.Marshal(&m); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
}

func readManifest(t *testing.T, s *segment.Store, key string) *segment.Manifest {
	t.Helper()
	m, err := s.ReadManifest(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestVerifyNamesWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// damage damages version 2 (or 3, with delta) and returns the key
		// the problem must name and a part of what it must say.
		version int
		damage  func(t *testing.T, b segment.Blobs, m *segment.Manifest, key string) (string, string)
	}{
		{"a flipped byte in a block", 2, func(t *testing.T, b segment.Blobs, m *segment.Manifest, _ string) (string, string) {
			k := m.Blocks[1].Key // rewritten by version 2 (id-0100)
			data, _ := b.Get(ctx, k)
			data[len(data)/2] ^= 0x40
			if err := b.Put(ctx, k, data); err != nil {
				t.Fatal(err)
			}
			return k, "SHA-256"
		}},
		{"a block missing", 2, func(t *testing.T, b segment.Blobs, m *segment.Manifest, _ string) (string, string) {
			k := m.Blocks[5].Key // rewritten by version 2 (id-0500)
			if err := b.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			return k, "missing"
		}},
		{"a block digest that is not its records'", 2, func(t *testing.T, b segment.Blobs, m *segment.Manifest, key string) (string, string) {
			editManifest(t, b, key, func(m *segment.Manifest) { m.Blocks[1].Digest = segment.DigestOf(nil).String() })
			return m.Blocks[1].Key, "digest 00000000000000000000000000000000 recorded"
		}},
		{"a version digest that is not its records'", 2, func(t *testing.T, b segment.Blobs, m *segment.Manifest, key string) (string, string) {
			editManifest(t, b, key, func(m *segment.Manifest) { m.Digest = segment.DigestOf(nil).String() })
			return key, "version digest"
		}},
		{"a flipped byte in a delta", 3, func(t *testing.T, b segment.Blobs, m *segment.Manifest, _ string) (string, string) {
			k := m.Deltas[0].Key
			data, _ := b.Get(ctx, k)
			data[len(data)/3] ^= 0x01
			if err := b.Put(ctx, k, data); err != nil {
				t.Fatal(err)
			}
			return k, "SHA-256"
		}},
		{"an index blob missing", 2, func(t *testing.T, b segment.Blobs, m *segment.Manifest, key string) (string, string) {
			ik := "collections/" + testCollection + "/index/0000.vgraph"
			editManifest(t, b, key, func(m *segment.Manifest) {
				m.Index = &segment.IndexRef{Graph: segment.BlobRef{Key: ik, Bytes: 10}, Dimension: 4, Distance: "l2"}
			})
			return ik, "missing"
		}},
		{"a manifest that does not decode", 2, func(t *testing.T, b segment.Blobs, m *segment.Manifest, key string) (string, string) {
			if err := b.Put(ctx, key, []byte(`{"format_version": 1,`)); err != nil {
				t.Fatal(err)
			}
			return key, "unexpected end"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
			keys, _ := writeVersions(t, s)
			key := keys[tc.version-1]
			wantKey, wantWhat := tc.damage(t, blobs, readManifest(t, s, key), key)
			rep, err := s.Verify(ctx, key, segment.VerifyOptions{})
			if err != nil {
				t.Fatalf("Verify: %v (damage is a report, not an error)", err)
			}
			verr := rep.Err("verify")
			var ve *segment.VerificationError
			if !errors.Is(verr, segment.ErrVerification) || !errors.As(verr, &ve) || ve.Phase != "verify" {
				t.Fatalf("report error %v, want a verification failure", verr)
			}
			found := slices.ContainsFunc(rep.Problems, func(p segment.Problem) bool {
				return p.Key == wantKey && strings.Contains(p.What, wantWhat)
			})
			if !found || !strings.Contains(verr.Error(), "verification failed") || !strings.Contains(verr.Error(), wantKey) {
				t.Errorf("problems %v (error %q), want one naming %s with %q", rep.Problems, verr, wantKey, wantWhat)
			}
			// The other versions are not affected.
			if tc.version == 2 {
				if rep, err := s.Verify(ctx, keys[0], segment.VerifyOptions{}); err != nil || len(rep.Problems) > 0 {
					t.Errorf("version 1: %v %v", err, rep.Problems)
				}
			}
		})
	}
}

func TestVerifyOfAVersionWithoutDigestsIsNotAFailure(t *testing.T) {
	s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
	keys, views := writeVersions(t, s)
	for i, key := range keys {
		editManifest(t, blobs, key, func(m *segment.Manifest) {
			m.Digest = ""
			for j := range m.Blocks {
				m.Blocks[j].Digest, m.Blocks[j].Checksum = "", ""
			}
			for j := range m.Deltas {
				m.Deltas[j].Digest, m.Deltas[j].TombstoneDigest, m.Deltas[j].Checksum = "", "", ""
			}
		})
		rep, err := s.Verify(context.Background(), key, segment.VerifyOptions{})
		if err != nil || len(rep.Problems) > 0 {
			t.Fatalf("version %d: %v %v", i+1, err, rep.Problems)
		}
		if rep.DigestRecorded || rep.Unrecorded != len(readManifest(t, s, key).Blocks)+len(readManifest(t, s, key).Deltas) {
			t.Errorf("version %d: digest recorded %v, %d unrecorded", i+1, rep.DigestRecorded, rep.Unrecorded)
		}
		if rep.Digest != segment.DigestOf(views[i]) {
			t.Errorf("version %d: digest %s, want %s", i+1, rep.Digest, segment.DigestOf(views[i]))
		}
	}
	// A version written over such a base reuses blocks without digests:
	// it records none for itself, and still verifies.
	base := readManifest(t, s, keys[1])
	base.Deltas, base.FormatVersion = nil, 1
	rng := rand.New(rand.NewPCG(8, 8))
	r := newRecord(rng, "id-0001", 4)
	m, _, key := commit(t, s, base, []segment.Change{{ID: r.ID, Record: &r}})
	if m.Digest != "" || m.Blocks[0].Digest == "" {
		t.Errorf("version digest %q (want none), first block's %q (want one)", m.Digest, m.Blocks[0].Digest)
	}
	if rep, err := s.Verify(context.Background(), key, segment.VerifyOptions{}); err != nil || len(rep.Problems) > 0 {
		t.Errorf("%v %v", err, rep.Problems)
	}
}

// corruptingBlobs stores every blob under prefix with one byte flipped.
type corruptingBlobs struct {
	segment.Blobs
	prefix string
}

func (c corruptingBlobs) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, c.prefix) {
		data = slices.Clone(data)
		data[len(data)/2] ^= 0x08
	}
	return c.Blobs.Put(ctx, key, data)
}

func TestAWriteWhoseBlobsDoNotReadBackFails(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"blocks", "deltas"} {
		t.Run(kind, func(t *testing.T) {
			s, blobs := NewStore(t, segment.Config{MaxBlockRecords: 100})
			keys, _ := writeVersions(t, s)
			base := readManifest(t, s, keys[1])
			bad := segment.NewStore(corruptingBlobs{blobs, "collections/" + testCollection + "/" + kind + "/"}, segment.Config{MaxBlockRecords: 100}, nil)
			w := bad.NewWriter(testCollection, base)
			r := newRecord(rand.New(rand.NewPCG(1, 1)), "id-0002", 4)
			var err error
			if kind == "blocks" {
				_, _, err = w.WriteBlocks(ctx, []segment.Change{{ID: r.ID, Record: &r}}, 3, 4, nil)
			} else {
				_, _, err = w.WriteDelta(ctx, []segment.Change{{ID: r.ID, Record: &r}, {ID: "id-0400"}, {ID: "id-0600"}, {ID: "id-0800"}, {ID: "id-0990"}}, 3, 4)
			}
			var ve *segment.VerificationError
			if !errors.As(err, &ve) || ve.Phase != "compaction" || len(ve.Problems) != 1 ||
				!strings.Contains(ve.Problems[0].Key, "/"+kind+"/") || !strings.Contains(err.Error(), "read back") {
				t.Fatalf("write: %v, want a verification failure of the %s written", err, kind)
			}
			if err := w.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			// With the check off the same write passes (and leaves damage
			// for Verify to find).
			off := segment.NewStore(corruptingBlobs{blobs, "collections/" + testCollection + "/" + kind + "/"}, segment.Config{MaxBlockRecords: 100, NoReadBack: true}, nil)
			w = off.NewWriter(testCollection, base)
			if kind == "blocks" {
				_, _, err = w.WriteBlocks(ctx, []segment.Change{{ID: r.ID, Record: &r}}, 3, 4, nil)
			} else {
				_, _, err = w.WriteDelta(ctx, []segment.Change{{ID: r.ID, Record: &r}, {ID: "id-0990"}}, 3, 4)
			}
			if err != nil {
				t.Fatalf("write without the read-back check: %v", err)
			}
		})
	}
}

func TestAWriterThatDropsARecordFailsVerification(t *testing.T) {
	ctx := context.Background()
	s, _ := NewStore(t, segment.Config{MaxBlockRecords: 100})
	keys, _ := writeVersions(t, s)
	base := readManifest(t, s, keys[1])
	dropped := ""
	segment.SetDropRecord(s, func(recs []materialize.Record) []materialize.Record {
		if dropped != "" || len(recs) < 2 {
			return recs
		}
		dropped = recs[1].ID
		return slices.Delete(slices.Clone(recs), 1, 2)
	})
	w := s.NewWriter(testCollection, base)
	r := newRecord(rand.New(rand.NewPCG(1, 1)), "id-0002", 4)
	_, _, err := w.WriteBlocks(ctx, []segment.Change{{ID: r.ID, Record: &r}}, 3, 4, nil)
	var ve *segment.VerificationError
	if !errors.As(err, &ve) || ve.Phase != "compaction" || dropped == "" || !strings.Contains(err.Error(), "the blocks written hold 99 records") {
		t.Fatalf("write dropping %q: %v, want a verification failure", dropped, err)
	}
	// The same write without the fault passes.
	segment.SetDropRecord(s, nil)
	w = s.NewWriter(testCollection, base)
	if _, _, err := w.WriteBlocks(ctx, []segment.Change{{ID: r.ID, Record: &r}}, 3, 4, nil); err != nil {
		t.Fatal(err)
	}
}
