package segment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/compactorhq/compactor/internal/materialize"
)

var errPowerCut = errors.New("power cut")

// crashFS is a durableFS over the real file system that also keeps what a
// power loss would leave: file contents as of their last Sync, directory
// entries as of their directory's last SyncDir. From the failAt-th
// operation on (0: never) every operation fails, as if the machine had lost
// power there; powerCut then rewrites the directory tree under root to its
// durable state. With ignoreSync, syncs are performed but leave nothing
// durable: a writer that never syncs. It records every operation.
type crashFS struct {
	mu         sync.Mutex
	root       string
	failAt     int
	ignoreSync bool

	ops    int
	dead   bool
	events []string
	cur    map[string]map[string]*cnode // directory → name → node, as it is
	dur    map[string]map[string]*cnode // directory → name → node, as durable
}

type cnode struct {
	dir     bool
	data    []byte // as written
	durable []byte // as of the last Sync
}

func newCrashFS(root string) *crashFS {
	return &crashFS{root: root, cur: map[string]map[string]*cnode{root: {}}, dur: map[string]map[string]*cnode{root: {}}}
}

// step counts an operation and fails it once the power is cut. c.mu held.
func (c *crashFS) step(event string) error {
	if c.dead {
		return errPowerCut
	}
	c.ops++
	if c.failAt > 0 && c.ops >= c.failAt {
		c.dead = true
		return errPowerCut
	}
	c.events = append(c.events, event)
	return nil
}

func (c *crashFS) rel(path string) string {
	r, _ := filepath.Rel(c.root, path)
	return filepath.ToSlash(r)
}

func (c *crashFS) CreateTemp(dir, pattern string) (durableFile, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.step("create " + c.rel(filepath.Join(dir, pattern))); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	n := &cnode{}
	c.cur[dir][filepath.Base(f.Name())] = n
	return &crashFile{fs: c, f: f, n: n}, nil
}

func (c *crashFS) Rename(oldpath, newpath string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.step("rename " + c.rel(oldpath) + " " + c.rel(newpath)); err != nil {
		return err
	}
	if err := os.Rename(oldpath, newpath); err != nil {
		return err
	}
	n := c.cur[filepath.Dir(oldpath)][filepath.Base(oldpath)]
	delete(c.cur[filepath.Dir(oldpath)], filepath.Base(oldpath))
	c.cur[filepath.Dir(newpath)][filepath.Base(newpath)] = n
	return nil
}

func (c *crashFS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.step("remove " + c.rel(name)); err != nil {
		return err
	}
	if err := os.Remove(name); err != nil {
		return err
	}
	delete(c.cur[filepath.Dir(name)], filepath.Base(name))
	return nil
}

func (c *crashFS) Mkdir(name string, perm fs.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.step("mkdir " + c.rel(name)); err != nil {
		return err
	}
	if err := os.Mkdir(name, perm); err != nil {
		return err
	}
	c.cur[filepath.Dir(name)][filepath.Base(name)] = &cnode{dir: true}
	c.cur[name], c.dur[name] = map[string]*cnode{}, map[string]*cnode{}
	return nil
}

func (c *crashFS) SyncDir(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.step("syncdir " + c.rel(dir)); err != nil {
		return err
	}
	if !c.ignoreSync {
		c.dur[dir] = maps.Clone(c.cur[dir])
	}
	return nil
}

// durable returns the content that key would have after a power cut now,
// and whether it would exist.
func (c *crashFS) durable(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := c.root
	parts := strings.Split(key, "/")
	for i, p := range parts {
		n, ok := c.dur[dir][p]
		if !ok {
			return nil, false
		}
		if i == len(parts)-1 {
			return n.durable, !n.dir
		}
		dir = filepath.Join(dir, p)
	}
	return nil, false
}

// powerCut stops every further operation and rewrites the tree under root
// to what was durable.
func (c *crashFS) powerCut(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = true
	if err := os.RemoveAll(c.root); err != nil {
		t.Fatal(err)
	}
	var rebuild func(dir string)
	rebuild = func(dir string) {
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		for name, n := range c.dur[dir] {
			p := filepath.Join(dir, name)
			if n.dir {
				rebuild(p)
			} else if err := os.WriteFile(p, n.durable, 0o666); err != nil {
				t.Fatal(err)
			}
		}
	}
	rebuild(c.root)
}

type crashFile struct {
	fs *crashFS
	f  *os.File
	n  *cnode
}

func (f *crashFile) Name() string { return f.f.Name() }
func (f *crashFile) Close() error { return f.f.Close() }

func (f *crashFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step("write " + f.fs.rel(f.f.Name())); err != nil {
		return 0, err
	}
	f.n.data = append(f.n.data, p...)
	return f.f.Write(p)
}

func (f *crashFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.fs.step("sync " + f.fs.rel(f.f.Name())); err != nil {
		return err
	}
	if !f.fs.ignoreSync {
		f.n.durable = bytes.Clone(f.n.data)
	}
	return nil
}

const durableCollection = "c0ffee00-0000-4000-8000-00000000d15c"

// durableVersions writes versions of a collection through a file:// store
// over fsys, one per round, and returns the manifest key and expected
// records of each version whose WriteManifest returned (the point where a
// compaction commits it in the catalog). It stops at the first error (the
// machine is gone). after, when set, runs after each such version.
func durableVersions(t *testing.T, root string, fsys durableFS, rounds int, after func(m *Manifest, key string)) (keys []string, want [][]materialize.Record) {
	t.Helper()
	ctx := context.Background()
	b, closer, err := openBucketFS(ctx, "file://"+filepath.ToSlash(root), fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	s := NewStore(b, Config{MaxBlockRecords: 8, MinBlockRecords: 2}, nil)
	model := map[string]materialize.Record{}
	var base *Manifest
	for round := range rounds {
		var changes []Change
		for i := range 12 {
			id := fmt.Sprintf("id-%02d", (round*5+i)%30)
			d := fmt.Sprintf("round %d", round)
			r := materialize.Record{ID: id, Embedding: []float32{float32(round), float32(i)}, Document: &d}
			model[id] = r
			changes = append(changes, Change{ID: id, Record: &r})
		}
		slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.ID, b.ID) })
		w := s.NewWriter(durableCollection, base)
		m, _, err := w.WriteBlocks(ctx, changes, int64(round+1), 2, nil)
		if err != nil {
			return keys, want
		}
		key, _, err := w.WriteManifest(ctx, m)
		if err != nil {
			return keys, want
		}
		keys = append(keys, key)
		want = append(want, slices.SortedFunc(maps.Values(model), func(a, b materialize.Record) int { return strings.Compare(a.ID, b.ID) }))
		if after != nil {
			after(m, key)
		}
		base = m
	}
	return keys, want
}

// TestPutIsDurableBeforeItReturns records the file system calls of the
// file:// blob layer: when WriteManifest returns (and a compaction commits
// the version in the catalog), every block of the version and its manifest
// were fsynced, renamed into place and their directory fsynced, so a power
// cut at that point keeps them whole.
func TestPutIsDurableBeforeItReturns(t *testing.T) {
	root := t.TempDir()
	cfs := newCrashFS(root)
	checked := 0
	_, _ = durableVersions(t, root, cfs, 4, func(m *Manifest, key string) {
		for _, k := range append(blockKeysOf(m), key) {
			got, ok := cfs.durable(k)
			if !ok {
				t.Fatalf("%s is not durable when the version is committed", k)
			}
			disk, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(k)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, disk) {
				t.Fatalf("%s: durable content is %d bytes, the file %d bytes", k, len(got), len(disk))
			}
			checked++
		}
	})
	if checked < 8 {
		t.Fatalf("only %d blobs checked", checked)
	}
	// The calls themselves: per blob a file sync, then its rename; then a
	// sync of its directory before the manifest is renamed into place (for
	// the manifest, right after).
	cfs.mu.Lock()
	events := slices.Clone(cfs.events)
	cfs.mu.Unlock()
	isManifestRename := func(e string) bool {
		return strings.HasPrefix(e, "rename ") && strings.Contains(strings.Fields(e)[2], "/manifests/")
	}
	syncdirs := 0
	for i, e := range events {
		if strings.HasPrefix(e, "syncdir ") {
			syncdirs++
		}
		if !strings.HasPrefix(e, "rename ") {
			continue
		}
		tmp := strings.Fields(e)[1]
		dst := strings.Fields(e)[2]
		if i == 0 || events[i-1] != "sync "+tmp {
			t.Errorf("%s: not preceded by a sync of the file (%q)", e, events[max(i-1, 0)])
		}
		before := len(events)
		if j := slices.IndexFunc(events[i+1:], isManifestRename); j >= 0 && !isManifestRename(e) {
			before = i + 1 + j
		}
		if !slices.Contains(events[i+1:before], "syncdir "+pathDir(dst)) {
			t.Errorf("%s: its directory is not synced before the manifest", e)
		}
	}
	if renames := len(slices.DeleteFunc(slices.Clone(events), func(e string) bool { return !strings.HasPrefix(e, "rename ") })); syncdirs >= renames {
		t.Errorf("%d directory syncs for %d blobs: a version's blocks should share one", syncdirs, renames)
	}
	for _, dir := range []string{"collections", "collections/" + durableCollection, "collections/" + durableCollection + "/blocks", "collections/" + durableCollection + "/manifests"} {
		if i := slices.Index(events, "mkdir "+dir); i < 0 || i+1 == len(events) || events[i+1] != "syncdir "+pathDir(dir) {
			t.Errorf("directory %s: not created and synced into its parent", dir)
		}
	}
}

func pathDir(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return "."
}

func blockKeysOf(m *Manifest) []string {
	var keys []string
	for _, b := range m.Blocks {
		keys = append(keys, b.Key)
	}
	return keys
}

// readVersions opens root as a file:// store and reads every record of each
// version; it returns an error naming the first version that is not whole.
func readVersions(t *testing.T, root string, keys []string, want [][]materialize.Record) error {
	t.Helper()
	ctx := context.Background()
	b, closer, err := OpenBucket(ctx, "file://"+filepath.ToSlash(root))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	s := NewStore(b, Config{MaxBlockRecords: 8, MinBlockRecords: 2}, nil)
	for i, key := range keys {
		m, err := s.ReadManifest(ctx, key)
		if err != nil {
			return fmt.Errorf("version %d: %w", i+1, err)
		}
		var got []materialize.Record
		if err := s.Scan(ctx, m, "", func(r materialize.Record) bool { got = append(got, r); return true }); err != nil {
			return fmt.Errorf("version %d: %w", i+1, err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			return fmt.Errorf("version %d: %d records, want %d", i+1, len(got), len(want[i]))
		}
	}
	return nil
}

// TestPowerCutKeepsEveryCommittedVersion cuts the power at every file system
// operation of three rounds of writes in turn, rebuilds the directory from
// what was durable, and reads every version that was committed (its
// WriteManifest had returned) in full. The same with syncs that make
// nothing durable loses a committed version: the double can tell.
func TestPowerCutKeepsEveryCommittedVersion(t *testing.T) {
	const rounds = 3
	dry := newCrashFS(t.TempDir())
	durableVersions(t, dry.root, dry, rounds, nil)
	total := dry.ops
	if total < 40 {
		t.Fatalf("only %d file system operations in %d rounds", total, rounds)
	}
	lost := 0
	for _, ignoreSync := range []bool{false, true} {
		for cut := 1; cut <= total+1; cut++ {
			root := t.TempDir()
			cfs := newCrashFS(root)
			cfs.failAt, cfs.ignoreSync = cut, ignoreSync
			keys, want := durableVersions(t, root, cfs, rounds, nil)
			cfs.powerCut(t)
			err := readVersions(t, root, keys, want)
			switch {
			case err != nil && !ignoreSync:
				t.Fatalf("power cut at operation %d of %d: %d versions committed, %v", cut, total, len(keys), err)
			case err != nil:
				lost = cut
			}
			if lost > 0 {
				break // the double can tell; one case shows it
			}
		}
	}
	if lost == 0 {
		t.Fatal("without syncs no power cut lost a committed version: the test double keeps unsynced data")
	}
	t.Logf("%d cut points, every committed version whole after each; without syncs, a cut at operation %d loses one", total+1, lost)
}

// noSyncFS is osFS without fsync: what file:// Puts cost before they were
// made durable.
type noSyncFS struct{ osFS }

type noSyncFile struct{ *os.File }

func (noSyncFile) Sync() error { return nil }

func (noSyncFS) CreateTemp(dir, pattern string) (durableFile, error) {
	f, err := os.CreateTemp(dir, pattern)
	return noSyncFile{f}, err
}

func (noSyncFS) SyncDir(string) error { return nil }

// BenchmarkFilePut: one 1 MiB block Put to a file:// store, durable (file
// and directory fsync) and without syncs.
func BenchmarkFilePut(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 1<<20)
	for _, bc := range []struct {
		name string
		fs   durableFS
	}{{"durable", osFS{}}, {"no-sync", noSyncFS{}}} {
		b.Run(bc.name, func(b *testing.B) {
			blobs, closer, err := openBucketFS(context.Background(), "file://"+filepath.ToSlash(b.TempDir()), bc.fs)
			if err != nil {
				b.Fatal(err)
			}
			defer closer.Close()
			b.SetBytes(int64(len(data)))
			i := 0
			for b.Loop() {
				i++
				if err := blobs.Put(context.Background(), fmt.Sprintf("collections/c/blocks/%d.parquet", i), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPutRemakesARemovedDirectory: a Put into a directory removed since an
// earlier Put made it (e.g. with a deleted collection's last blob) makes it
// again instead of failing; keys outside the root are refused.
func TestPutRemakesARemovedDirectory(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs, closer, err := OpenBucket(ctx, "file://"+filepath.ToSlash(root))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	key := "collections/c/blocks/a.parquet"
	for round := range 2 {
		if err := blobs.Put(ctx, key, []byte("block")); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got, err := blobs.Get(ctx, key); err != nil || string(got) != "block" {
			t.Fatalf("round %d: get %q, %v", round, got, err)
		}
		if err := os.RemoveAll(filepath.Join(root, "collections")); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"../escape", "/abs", "a//b", "a/./b", "a\\b", "a\x01b", ""} {
		if err := blobs.Put(ctx, bad, []byte("x")); !errors.Is(err, errBadKey) {
			t.Errorf("put %q: %v, want errBadKey", bad, err)
		}
	}
}

// BenchmarkDurableWrite: one version of 10 blocks of 4,096 64-dim records
// written by a Writer to a file:// store, durable (file fsyncs, one
// directory fsync for the blocks, the manifest's) and without syncs.
func BenchmarkDurableWrite(b *testing.B) {
	var changes []Change
	for i := range 4096 * 10 {
		r := materialize.Record{ID: fmt.Sprintf("id-%06d", i), Embedding: make([]float32, 64)}
		for j := range r.Embedding {
			r.Embedding[j] = float32(i*j%1000) / 7
		}
		changes = append(changes, Change{ID: r.ID, Record: &r})
	}
	for _, bc := range []struct {
		name string
		fs   durableFS
	}{{"durable", osFS{}}, {"no-sync", noSyncFS{}}} {
		b.Run(bc.name, func(b *testing.B) {
			blobs, closer, err := openBucketFS(context.Background(), "file://"+filepath.ToSlash(b.TempDir()), bc.fs)
			if err != nil {
				b.Fatal(err)
			}
			defer closer.Close()
			s := NewStore(blobs, Config{}, nil)
			for b.Loop() {
				w := s.NewWriter(durableCollection, nil)
				m, _, err := w.WriteBlocks(context.Background(), changes, 1, 64, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := w.WriteManifest(context.Background(), m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
