package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// durableFS is what durableFiles needs from a file system: the operating
// system in production (osFS), a double that simulates power loss in tests.
type durableFS interface {
	// CreateTemp creates a new file in dir, as os.CreateTemp.
	CreateTemp(dir, pattern string) (durableFile, error)
	// Rename renames a file, as os.Rename.
	Rename(oldpath, newpath string) error
	// Remove removes a file, as os.Remove.
	Remove(name string) error
	// Mkdir creates one directory, as os.Mkdir.
	Mkdir(name string, perm fs.FileMode) error
	// SyncDir makes the entries of directory dir (files created, renamed
	// or removed in it) durable: fsync(2) on the directory.
	SyncDir(dir string) error
}

// durableFile is a file open for writing.
type durableFile interface {
	io.Writer
	// Name is the file's path.
	Name() string
	// Sync makes the file's content durable: fsync(2).
	Sync() error
	Close() error
}

// osFS is durableFS on the operating system.
type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (durableFile, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Rename(oldpath, newpath string) error                { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                            { return os.Remove(name) }
func (osFS) Mkdir(name string, perm fs.FileMode) error           { return os.Mkdir(name, perm) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}

// durableFiles writes blobs of a file:// bucket so that a blob is durable
// when put returns: the data goes to a temporary file next to its final
// path, which is fsynced, closed and renamed over the final path, and then
// the directory is fsynced (the rename is durable only then). The directory
// fsync, the larger part of the cost, can be left to one syncNames call for
// many blobs (a Writer's blocks). Directories
// it creates are fsynced into their parents the same way. A commit that
// references a blob written this way can therefore never outlive the blob
// at a power loss (docs/semantics.md "Durability"). A temporary file left by a crash
// is an unreferenced blob that GC collects.
//
// Keys are slash-separated relative paths (fs.ValidPath) without
// backslashes or control characters, so that the path written is the one
// fileblob reads. Safe for concurrent use.
type durableFiles struct {
	root string
	fs   durableFS

	// synced holds directories known to be durable in their parents (a
	// directory found existing is fsynced into its parent once, in case
	// its creator had not yet done so).
	mu     sync.Mutex
	synced map[string]bool
}

func newDurableFiles(root string, fsys durableFS) *durableFiles {
	return &durableFiles{root: filepath.Clean(root), fs: fsys, synced: map[string]bool{}}
}

// errBadKey is returned for a key that does not name a file under the root.
var errBadKey = errors.New("key is not a clean relative path")

func (d *durableFiles) path(key string) (string, error) {
	if !fs.ValidPath(key) || key == "." || strings.ContainsAny(key, `\`) ||
		strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: %q", errBadKey, key)
	}
	return filepath.Join(d.root, filepath.FromSlash(key)), nil
}

// put writes data at key. With syncDir the blob is durable when put
// returns; without, its content is, but its name only once syncNames has
// covered it.
func (d *durableFiles) put(key string, data []byte, syncDir bool) (err error) {
	path, err := d.path(key)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := d.ensureDir(dir); err != nil {
		return err
	}
	f, err := d.fs.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if errors.Is(err, fs.ErrNotExist) {
		// The directory was removed since it was made (e.g. with the
		// collection's last blob): make it again.
		d.forget()
		if err = d.ensureDir(dir); err == nil {
			f, err = d.fs.CreateTemp(dir, filepath.Base(path)+".*.tmp")
		}
	}
	if err != nil {
		return fmt.Errorf("create temporary file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = d.fs.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := d.fs.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if syncDir {
		return d.fs.SyncDir(dir)
	}
	return nil
}

// syncNames makes the names of keys (written by put without syncDir)
// durable: one fsync per distinct directory.
func (d *durableFiles) syncNames(keys []string) error {
	dirs := make(map[string]bool)
	for _, key := range keys {
		path, err := d.path(key)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		if err := d.fs.SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// ensureDir creates dir and its missing parents up to the root, and makes
// each durable in its parent. The root itself was created at open.
func (d *durableFiles) ensureDir(dir string) error {
	d.mu.Lock()
	known := d.synced[dir]
	d.mu.Unlock()
	if known || dir == d.root || !strings.HasPrefix(dir, d.root+string(filepath.Separator)) {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := d.ensureDir(parent); err != nil {
		return err
	}
	if err := d.fs.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create directory: %w", err)
	}
	if err := d.fs.SyncDir(parent); err != nil {
		return err
	}
	d.mu.Lock()
	d.synced[dir] = true
	d.mu.Unlock()
	return nil
}

// forget empties the known-durable set (a directory was removed, perhaps
// with its parents): each directory is checked again at its next Put.
func (d *durableFiles) forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.synced)
}
