//go:build race

package compaction

// raceEnabled scales the property test down under the race detector, which
// slows the pure-Go SQLite driver about tenfold.
const raceEnabled = true
