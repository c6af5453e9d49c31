// Package audit is the vocabulary of the audit log (DESIGN.md §8
// "Security"): who acted (Actor, carried in a request's context from the
// RPC API or the page down to the catalog), the events the catalog stores,
// and the hash chain that makes an edit or a deletion of a stored event
// detectable. It imports nothing of the project but the leaf package
// ctxval, so that the catalog, the manager and the adapters share it.
//
// The chain: each event stores the hash of the event before it (PrevHash;
// 32 zero bytes for the first) and its own Hash, the SHA-256 of
//
//	"compactor audit v1\n" || PrevHash (32 bytes) || Canonical(event)
//
// where Canonical is every field below, in this order, each as its length
// in bytes (8-byte big-endian unsigned) followed by its bytes: ID and Time
// (unix milliseconds) in decimal ASCII, then Principal, Role, Source,
// Action, CollectionID, Target, Reason, Before, After, JobID as UTF-8. The
// length prefixes make the encoding unambiguous: no two different events
// encode alike.
package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/compactorhq/compactor/internal/ctxval"
)

// Actor is who performs an operator action: the principal's name and role
// (as the credentials named them; "anonymous" without authentication) and
// the network address the request came from.
type Actor struct {
	Name   string
	Role   string
	Source string // host:port of the request's peer, as the server saw it
}

// WithActor returns ctx carrying a. The catalog records an audit event for
// the operator actions it performs under a context with an actor.
func WithActor(ctx context.Context, a Actor) context.Context {
	return ctxval.With(ctx, a)
}

// ActorFrom returns the actor ctx carries; false when none (the
// scheduler's and the manager's own work, which is not audited).
func ActorFrom(ctx context.Context) (Actor, bool) {
	return ctxval.From[Actor](ctx)
}

// Actions recorded in the audit log.
const (
	ActionCompact          = "compact"           // a one-off compaction queued (or a queued job expedited)
	ActionCancel           = "cancel"            // a job cancelled
	ActionPause            = "pause"             // automatic compaction paused (Target: a collection, or "*")
	ActionResume           = "resume"            // automatic compaction resumed
	ActionThrottle         = "throttle"          // the throughput cap set or removed
	ActionSettings         = "settings"          // a collection's threshold overrides replaced
	ActionCreateCollection = "collection.create" // a collection created
	ActionDeleteCollection = "collection.delete" // a collection deleted
	ActionPolicy           = "policy"            // a collection's scheduling policy changed
	ActionRollback         = "rollback"          // a kept version made current again
	ActionClearDeadLetter  = "dead-letter.clear" // a collection's dead-letter state cleared by hand
)

// TargetAll is the target of an action on every collection (the global
// pause, the throughput cap).
const TargetAll = "*"

// Event is one audit event as stored. Before and After are JSON objects of
// the state the action changed ("" when there is none: nothing before a
// creation, nothing after a deletion).
type Event struct {
	ID           int64 // position in the chain, from 1, without gaps
	Time         time.Time
	Principal    string
	Role         string
	Source       string
	Action       string
	CollectionID string // the collection acted on; "" for actions on every collection
	Target       string // what was acted on: a collection id, a job id, TargetAll
	Reason       string
	Before       string
	After        string
	JobID        string // the job queued or cancelled; ""
	PrevHash     [sha256.Size]byte
	Hash         [sha256.Size]byte
}

// chainLabel opens every hashed message, so that the hash of an event is
// never the hash of anything else the project hashes.
const chainLabel = "compactor audit v1\n"

// Canonical returns the canonical encoding of e's fields (not PrevHash and
// Hash); see the package documentation.
func Canonical(e Event) []byte {
	var b bytes.Buffer
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		b.Write(n[:])
		b.WriteString(s)
	}
	field(strconv.FormatInt(e.ID, 10))
	field(strconv.FormatInt(e.Time.UnixMilli(), 10))
	for _, s := range []string{e.Principal, e.Role, e.Source, e.Action, e.CollectionID, e.Target, e.Reason, e.Before, e.After, e.JobID} {
		field(s)
	}
	return b.Bytes()
}

// ComputeHash returns the hash of e chained to prev: SHA-256 over the
// chain label, prev and Canonical(e).
func ComputeHash(prev [sha256.Size]byte, e Event) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(chainLabel))
	h.Write(prev[:])
	h.Write(Canonical(e))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Seal sets e's PrevHash to prev and its Hash, and returns it.
func Seal(prev [sha256.Size]byte, e Event) Event {
	e.PrevHash = prev
	e.Hash = ComputeHash(prev, e)
	return e
}

// Hex is a hash in lower-case hex, as stored and shown.
func Hex(h [sha256.Size]byte) string { return hex.EncodeToString(h[:]) }

// ParseHex parses a hash written by Hex.
func ParseHex(s string) ([sha256.Size]byte, bool) {
	var h [sha256.Size]byte
	if len(s) != 2*sha256.Size {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, false
	}
	return h, true
}
