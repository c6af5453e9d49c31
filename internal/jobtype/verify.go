package jobtype

import (
	"encoding/json"
	"fmt"
)

// PhaseVerifying is the phase of a verify job while it re-reads the
// version's blobs (progress: BlocksWritten of BlocksTotal counts the blobs
// checked of the version's blobs); PhaseReplaying while it re-materializes
// the version from the log (OpRecordsRead of OpRecordsTotal).
const (
	PhaseVerifying Phase = "verifying"
	PhaseReplaying Phase = "replaying"
)

// VerifyParams are the parameters of a verify job (KindVerify), kept as its
// row's params (a JSON object).
type VerifyParams struct {
	// Version is the version to verify; 0: the collection's current one
	// when the job runs.
	Version int64 `json:"version,omitempty"`
	// Replay also re-materializes the version from the previous kept
	// version and the log between them, and compares the digests.
	Replay bool `json:"replay,omitempty"`
	// Scrub: queued by the background scrub (its reads keep to
	// --scrub-max-throughput, and a failure counts under phase "scrub").
	Scrub bool `json:"scrub,omitempty"`
}

// Encode returns p as a job's params: "" for the zero value.
func (p VerifyParams) Encode() string {
	if p == (VerifyParams{}) {
		return ""
	}
	b, _ := json.Marshal(p) // a struct of an int and bools always encodes
	return string(b)
}

// DecodeVerifyParams reads a verify job's params ("" is the zero value).
// Errors: a params text that is not such a JSON object, or a negative
// version.
func DecodeVerifyParams(s string) (VerifyParams, error) {
	var p VerifyParams
	if s == "" {
		return p, nil
	}
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return p, fmt.Errorf("verify params %q: %w", s, err)
	}
	if p.Version < 0 {
		return p, fmt.Errorf("verify params %q: negative version", s)
	}
	return p, nil
}
