package segment

import (
	"errors"
	"fmt"
	"strings"
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
	if e.CollectionID == "" {
		return fmt.Sprintf("corrupt %s %s: %s", e.Kind, e.Key, detail)
	}
	return fmt.Sprintf("collection %s: corrupt %s %s: %s", e.CollectionID, e.Kind, e.Key, detail)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes a CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

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
