package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

// TestHashCoversEveryField: changing any field, or the previous hash,
// changes the hash; moving bytes between adjacent fields does too (the
// encoding is length-prefixed).
func TestHashCoversEveryField(t *testing.T) {
	base := Event{ID: 7, Time: time.UnixMilli(1764600000000), Principal: "alice", Role: "operator", Source: "10.0.0.1:5",
		Action: ActionCompact, CollectionID: "c", Target: "c", Reason: "r", Before: "{}", After: `{"a":1}`, JobID: "j"}
	var prev [32]byte
	h := ComputeHash(prev, base)
	edits := map[string]func(*Event){
		"id":        func(e *Event) { e.ID++ },
		"time":      func(e *Event) { e.Time = e.Time.Add(time.Millisecond) },
		"principal": func(e *Event) { e.Principal = "mallory" },
		"role":      func(e *Event) { e.Role = "admin" },
		"source":    func(e *Event) { e.Source = "" },
		"action":    func(e *Event) { e.Action = ActionCancel },
		"coll":      func(e *Event) { e.CollectionID = "d" },
		"target":    func(e *Event) { e.Target = "*" },
		"reason":    func(e *Event) { e.Reason = "" },
		"before":    func(e *Event) { e.Before = "" },
		"after":     func(e *Event) { e.After = "{}" },
		"job":       func(e *Event) { e.JobID = "" },
		"shift":     func(e *Event) { e.Principal, e.Role = "aliceo", "perator" },
	}
	for name, edit := range edits {
		e := base
		edit(&e)
		if ComputeHash(prev, e) == h {
			t.Errorf("editing %s keeps the hash", name)
		}
	}
	prev[0] = 1
	if ComputeHash(prev, base) == h {
		t.Error("another previous hash keeps the hash")
	}
	if s := Seal(prev, base); s.PrevHash != prev || s.Hash != ComputeHash(prev, base) {
		t.Error("Seal")
	}
	if got, ok := ParseHex(Hex(h)); !ok || got != h {
		t.Error("ParseHex(Hex)")
	}
}

// TestHashIsTheDocumentedOne computes the hash of an event as the package
// documentation (and docs/operations.md) describe it, byte by byte, so that
// a verifier written from the documentation agrees with the server.
func TestHashIsTheDocumentedOne(t *testing.T) {
	e := Event{ID: 12, Time: time.UnixMilli(1764600000123), Principal: "p", Role: "admin", Action: ActionPause, Target: TargetAll, After: "{}"}
	prev := sha256.Sum256([]byte("previous"))
	msg := []byte("compactor audit v1\n")
	msg = append(msg, prev[:]...)
	for _, f := range []string{"12", "1764600000123", "p", "admin", "", "pause", "", "*", "", "", "{}", ""} {
		msg = binary.BigEndian.AppendUint64(msg, uint64(len(f)))
		msg = append(msg, f...)
	}
	if want := sha256.Sum256(msg); ComputeHash(prev, e) != want {
		t.Fatalf("hash %s, the documented encoding gives %s", Hex(ComputeHash(prev, e)), Hex(want))
	}
}
