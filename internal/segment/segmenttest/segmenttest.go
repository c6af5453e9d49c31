// Package segmenttest holds test doubles for the segment package's blob
// store: an in-memory store, a wrapper that injects faults and counts calls,
// and a wrapper and clock that give blobs fake modification times.
package segmenttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/compactorhq/compactor/internal/segment"
)

// ErrInjected is wrapped by the default error of a failing FaultyBlobs Put.
var ErrInjected = errors.New("injected fault")

// NewMem returns an empty in-memory blob store (a mem:// bucket) that is
// closed when the test ends.
func NewMem(t testing.TB) segment.Blobs {
	t.Helper()
	b, closer, err := segment.OpenBucket(context.Background(), "mem://")
	if err != nil {
		t.Fatalf("open mem bucket: %v", err)
	}
	t.Cleanup(func() {
		if err := closer.Close(); err != nil {
			t.Errorf("close mem bucket: %v", err)
		}
	})
	return b
}

// FaultyBlobs wraps a Blobs, counts Puts, Gets and Deletes, and can fail the Nth
// Put or hold Puts until released. It is safe for concurrent use; set the
// exported fields before sharing it (or between calls from the goroutine
// that makes them).
type FaultyBlobs struct {
	// Blobs is the wrapped store.
	Blobs segment.Blobs
	// FailPutAt makes the FailPutAt-th Put (1-based, counting Puts since
	// creation or the last Reset) fail without writing. 0: no Put fails.
	FailPutAt int
	// Err is the error of the failing Put. nil: an error that names the key
	// and wraps ErrInjected.
	Err error
	// Hold, when not nil, makes every Put wait until it is closed (or the
	// Put's context is done, returning its error) before doing anything
	// else.
	Hold <-chan struct{}
	// BeforePut, when not nil, is called at the start of every Put with its
	// 1-based number and key (for example to cancel a context at the Nth
	// Put). It is called without a lock held.
	BeforePut func(n int, key string)

	mu      sync.Mutex
	puts    int
	gets    int
	deletes int
	keys    []string
	deleted []string
}

// NewFaulty wraps b.
func NewFaulty(b segment.Blobs) *FaultyBlobs { return &FaultyBlobs{Blobs: b} }

// Put counts the Put, then holds, fails or forwards it.
func (f *FaultyBlobs) Put(ctx context.Context, key string, data []byte) error {
	f.mu.Lock()
	f.puts++
	n := f.puts
	fail, injected := f.FailPutAt, f.Err
	hold, before := f.Hold, f.BeforePut
	f.mu.Unlock()

	if before != nil {
		before(n, key)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return fmt.Errorf("put %s: %w", key, ctx.Err())
		}
	}
	if n == fail {
		if injected == nil {
			injected = fmt.Errorf("put %s (put %d): %w", key, n, ErrInjected)
		}
		return injected
	}
	if err := f.Blobs.Put(ctx, key, data); err != nil {
		return err
	}
	f.mu.Lock()
	f.keys = append(f.keys, key)
	f.mu.Unlock()
	return nil
}

// Get counts the Get and forwards it.
func (f *FaultyBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	f.mu.Lock()
	f.gets++
	f.mu.Unlock()
	return f.Blobs.Get(ctx, key)
}

// Delete counts the Delete and forwards it.
func (f *FaultyBlobs) Delete(ctx context.Context, key string) error {
	f.mu.Lock()
	f.deletes++
	f.deleted = append(f.deleted, key)
	f.mu.Unlock()
	return f.Blobs.Delete(ctx, key)
}

// List forwards to the wrapped store.
func (f *FaultyBlobs) List(ctx context.Context, prefix string) ([]segment.BlobInfo, error) {
	return f.Blobs.List(ctx, prefix)
}

// Puts returns the number of Puts since creation or the last Reset,
// including failed ones.
func (f *FaultyBlobs) Puts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.puts
}

// Gets returns the number of Gets since creation or the last Reset.
func (f *FaultyBlobs) Gets() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets
}

// Deletes returns the number of Deletes since creation or the last Reset.
func (f *FaultyBlobs) Deletes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.deletes
}

// PutKeys returns the keys of the successful Puts since creation or the last
// Reset, in order.
func (f *FaultyBlobs) PutKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.keys...)
}

// DeleteKeys returns the keys of the Deletes since creation or the last
// Reset, in order.
func (f *FaultyBlobs) DeleteKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

// Reset zeroes the counters (the configuration fields stay).
func (f *FaultyBlobs) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts, f.gets, f.deletes, f.keys, f.deleted = 0, 0, 0, nil, nil
}

// Clocked wraps a Blobs so that List reports, as the ModTime of every blob
// put through it, the time Now returned at its Put: GC tests can then age
// blobs with a fake clock. Blobs put around it keep the store's ModTime. Safe
// for concurrent use.
type Clocked struct {
	segment.Blobs
	now func() time.Time

	mu  sync.Mutex
	put map[string]time.Time
}

// NewClocked wraps b with the clock now.
func NewClocked(b segment.Blobs, now func() time.Time) *Clocked {
	return &Clocked{Blobs: b, now: now, put: make(map[string]time.Time)}
}

// Put forwards the Put and records its time.
func (c *Clocked) Put(ctx context.Context, key string, data []byte) error {
	if err := c.Blobs.Put(ctx, key, data); err != nil {
		return err
	}
	c.mu.Lock()
	c.put[key] = c.now()
	c.mu.Unlock()
	return nil
}

// List forwards the List and replaces the ModTime of blobs put through c.
func (c *Clocked) List(ctx context.Context, prefix string) ([]segment.BlobInfo, error) {
	infos, err := c.Blobs.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range infos {
		if t, ok := c.put[infos[i].Key]; ok {
			infos[i].ModTime = t
		}
	}
	return infos, nil
}

var (
	_ segment.Blobs = (*FaultyBlobs)(nil)
	_ segment.Blobs = (*Clocked)(nil)
)
