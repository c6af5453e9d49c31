package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Disk-full handling (docs/storage.md "Disk full"). A write that fails because the
// catalog's store is out of space returns a *StorageFullError and marks the
// catalog full. While the mark is set, Writable (the readiness check)
// checks again: on SQLite, that the volume has minFreeBytes available
// besides the space reserve; on both dialects, that a small probe write
// commits. Only then is the mark cleared: a small write that happens to fit
// in the space the failed one left proves nothing.
//
// On SQLite, the catalog also keeps a space reserve: a file of
// Config.ReserveBytes next to the database (<file>-reserve), allocated at
// Open. When deleting a collection finds the disk full, the reserve is
// released and the delete retried once (see deleteCollection). Writable
// allocates the reserve again once the space is there; until then the
// catalog reports itself full.

// minFreeBytes is the space a SQLite catalog's volume must have available
// (besides the reserve) before the catalog reports itself writable again.
const minFreeBytes = 1 << 20

// probePadBytes is the size of the row the write probe writes: a few pages,
// so that a probe that succeeds says a small write fits.
const probePadBytes = 64 << 10

// reserve is the space-reserve file of a SQLite catalog.
type reserve struct {
	path string
	size int64
	mu   sync.Mutex
}

// ensure creates the reserve file, or completes it, with size allocated
// bytes. On failure the partial file is removed (so it frees what it took)
// and the error is returned.
func (r *reserve) ensure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, err := os.Stat(r.path); err == nil && st.Size() >= r.size {
		return nil
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("create space reserve %s: %w", r.path, err)
	}
	err = allocate(f, r.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(r.path)
		return fmt.Errorf("allocate space reserve %s of %d bytes: %w", r.path, r.size, err)
	}
	return nil
}

// present reports whether the reserve file holds its full size.
func (r *reserve) present() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := os.Stat(r.path)
	return err == nil && st.Size() >= r.size
}

// release removes the reserve file and reports whether there was one.
func (r *reserve) release() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := os.Remove(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("release space reserve %s: %w", r.path, err)
	}
	return true, nil
}

// writeZeros allocates size bytes of f by writing zeros: the portable way
// (a sparse file from Truncate would reserve nothing).
func writeZeros(f *os.File, size int64) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		n := int64(len(buf))
		if left < n {
			n = left
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

// markFull records err as the catalog's current storage-full state.
func (c *Catalog) markFull(err *StorageFullError) {
	if c.full.Swap(err) == nil {
		c.log.Warn("catalog storage full: writes fail until space is freed", "code", err.Code, "err", err.Err)
	}
}

// clearFull clears the storage-full state.
func (c *Catalog) clearFull() {
	if c.full.Swap(nil) != nil {
		c.log.Info("catalog storage writable again")
	}
}

// storageFull returns err as a *StorageFullError when the driver says the
// store is out of space, and nil otherwise.
func (c *Catalog) storageFull(err error) *StorageFullError {
	var full *StorageFullError
	if errors.As(err, &full) {
		return full
	}
	if c.d.kind(err) != kindFull {
		return nil
	}
	return &StorageFullError{Store: StoreCatalog, Code: c.d.fullCode(err), Err: err}
}

// Writable reports whether the catalog can take writes (for /readyz). Once
// a write has failed for want of space, it returns an error matching
// ErrStorageFull until the space is back: on SQLite, until the space
// reserve is allocated again and the volume has 1 MiB available besides;
// on both dialects, until a small probe write (64 KiB) commits. Writable
// does that checking; it is cheap while no write has failed.
func (c *Catalog) Writable(ctx context.Context) error {
	if c.reserve != nil && !c.reserve.present() {
		if err := c.reserve.ensure(); err != nil {
			code, _ := IsNoSpace(err)
			if code == "" {
				code = "space reserve"
			}
			full := &StorageFullError{Store: StoreCatalog, Code: code, Err: err}
			c.markFull(full)
			return fmt.Errorf("restore the catalog's space reserve of %d bytes: %w", c.reserve.size, full)
		}
		c.log.Info("catalog space reserve restored", "bytes", c.reserve.size)
	}
	full := c.full.Load()
	if full == nil {
		return nil
	}
	if c.reserve != nil {
		if free, ok := freeBytes(filepath.Dir(c.reserve.path)); ok && free < minFreeBytes {
			return fmt.Errorf("%d bytes available on the catalog's volume, less than %d: %w", free, minFreeBytes, full)
		}
	}
	pad := make([]byte, probePadBytes)
	err := c.writeTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, c.d.q(`INSERT INTO storage_probe (id, written_at, pad) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET written_at = excluded.written_at, pad = excluded.pad`), ms(c.now()), pad)
		return err
	})
	if err != nil {
		return c.wrap(err, "probe catalog write")
	}
	c.clearFull()
	return nil
}
