// Package compactor holds what the whole module shares at its root: the
// bundled real sample data (Debian bookworm package records with 64-dim
// embeddings, see testdata/README.md), embedded so that `compactor demo`
// needs nothing beside the binary.
package compactor

import _ "embed"

// SampleBase is testdata/debian-base.jsonl.gz: 5,000 ADD operation records,
// gzipped JSON Lines.
//
//go:embed testdata/debian-base.jsonl.gz
var SampleBase string

// SampleUpdates is testdata/debian-updates.jsonl.gz: 217 UPSERT operation
// records over 216 of the base's ids (security and point updates).
//
//go:embed testdata/debian-updates.jsonl.gz
var SampleUpdates string
