package segment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// ErrCorrupt is returned (wrapped, as a *CorruptError) when a manifest or
// block exists but cannot be decoded, or contradicts what refers to it:
// retrying does not mend it.
var ErrCorrupt = errors.New("corrupt segment blob")

// ErrBlockTooLarge is returned (wrapped) by a write whose block would need
// more than MaxBlockDecodeBytes to decode: reads would refuse it, so it is
// not written. Retrying does not help; lowering --max-block-records does.
var ErrBlockTooLarge = errors.New("block too large to read back")

// Kinds of corrupt blobs (CorruptError.Kind).
const (
	KindBlock    = "block"
	KindManifest = "manifest"
)

// maxCorruptDetail bounds the detail a CorruptError repeats from the decoder:
// it may quote values of the file (ids, parquet-go's text), and the message
// reaches clients and the page.
const maxCorruptDetail = 300

// CorruptError is a blob of a segment that exists but cannot be decoded, or
// contradicts its manifest. It matches ErrCorrupt. Its message names the
// collection, the kind and the blob key relative to the bucket (never a
// server path), so that it can be shown to clients as it is.
type CorruptError struct {
	Kind         string // KindBlock or KindManifest
	CollectionID string // "" when the key names none
	Key          string // blob key, relative to the bucket
	Err          error  // what is wrong
}

func (e *CorruptError) Error() string {
	detail := e.Err.Error()
	if len(detail) > maxCorruptDetail {
		detail = strings.ToValidUTF8(detail[:maxCorruptDetail], "") + "…"
	}
	if errors.Is(e.Err, ErrNotExist) {
		if e.CollectionID == "" {
			return fmt.Sprintf("%s %s is missing: %s", e.Kind, e.Key, detail)
		}
		return fmt.Sprintf("collection %s: %s %s is missing: %s", e.CollectionID, e.Kind, e.Key, detail)
	}
	if e.CollectionID == "" {
		return fmt.Sprintf("corrupt %s %s: %s", e.Kind, e.Key, detail)
	}
	return fmt.Sprintf("collection %s: corrupt %s %s: %s", e.CollectionID, e.Kind, e.Key, detail)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes a CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// MissingError is a blob that a manifest lists (or a manifest that a
// collection names) and that the blob store does not have. It matches
// ErrNotExist and is not by itself damage: GC deletes the blobs of versions
// that are no longer current, so a reader that opened such a version may
// meet one gone. A caller that has checked that the version listing it is
// still current turns it into data loss with DataLoss.
type MissingError struct {
	Kind         string // KindBlock, KindDelta or KindManifest
	CollectionID string // "" when the key names none
	Key          string // blob key, relative to the bucket
	Err          error  // the blob store's error, matching ErrNotExist
}

func (e *MissingError) Error() string { return e.Err.Error() }
func (e *MissingError) Unwrap() error { return e.Err }

// DataLoss returns the missing blob as a *CorruptError (matching ErrCorrupt
// and ErrNotExist) of its kind and key: for a blob that the current version
// of its collection lists, which retrying does not bring back.
func (e *MissingError) DataLoss() *CorruptError {
	return &CorruptError{Kind: e.Kind, CollectionID: e.CollectionID, Key: e.Key,
		Err: fmt.Errorf("the current version lists it but the blob store does not have it: %w", ErrNotExist)}
}

// getBlob reads the blob of kind at key; a missing blob is a *MissingError.
func (s *Store) getBlob(ctx context.Context, kind, key string) ([]byte, error) {
	return s.getBlobInto(ctx, kind, key, nil)
}

// getBlobInto is getBlob reading into buf's memory where the store can
// (GetBuffer).
func (s *Store) getBlobInto(ctx context.Context, kind, key string, buf []byte) ([]byte, error) {
	data, err := GetBuffer(ctx, s.blobs, key, buf)
	if err != nil && errors.Is(err, ErrNotExist) {
		return nil, &MissingError{Kind: kind, CollectionID: collectionOfKey(key), Key: key, Err: err}
	}
	return data, err
}

// blobBuffers holds the buffers of whole-blob reads whose bytes nothing
// keeps past the read (getBlobBuffer): a block read for a few of its rows
// reuses one instead of allocating, and the runtime zeroing, a block-sized
// buffer each time. Buffers over maxPooledBlob are not kept.
var blobBuffers sync.Pool // of *[]byte

// maxPooledBlob is the largest buffer blobBuffers keeps (bytes).
const maxPooledBlob = 64 << 20

// getBlobBuffer is getBlob reading into a buffer of blobBuffers. Call
// release once nothing refers to data (or to anything sharing its memory)
// any more; data is nil after an error, and release is always set.
func (s *Store) getBlobBuffer(ctx context.Context, kind, key string) (data []byte, release func(), err error) {
	bp, _ := blobBuffers.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data, err = s.getBlobInto(ctx, kind, key, *bp)
	if err != nil {
		data = nil
	}
	release = func() {
		if cap(data) > cap(*bp) {
			*bp = data[:0]
		}
		if cap(*bp) <= maxPooledBlob {
			blobBuffers.Put(bp)
		}
	}
	return data, release, err
}

// corrupt returns a *CorruptError of the blob at key.
func corrupt(kind, key string, err error) *CorruptError {
	return &CorruptError{Kind: kind, CollectionID: collectionOfKey(key), Key: key, Err: err}
}

// collectionOfKey returns the collection id of a key under
// collections/<id>/, or "".
func collectionOfKey(key string) string {
	rest, ok := strings.CutPrefix(key, "collections/")
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "/")
	if !ok {
		return ""
	}
	return id
}
