package segment

import (
	"fmt"

	"github.com/spf13/pflag"
)

// Config sizes blocks. DefaultConfig gives the defaults; RegisterFlags and
// Validate are the binary's flags for it.
//
// NewStore cannot return an error, so it clamps instead of rejecting:
// MaxBlockRecords <= 0 takes the default and is at least 2;
// MinBlockRecords <= 0 takes the default, is at least 1 and at most
// MaxBlockRecords/2 (so that 0 < Min < Max, and the near-equal parts of a
// split block are never under the minimum). Validate rejects what NewStore
// would clamp.
type Config struct {
	// MaxBlockRecords: a block with more records is split (default 4096).
	MaxBlockRecords int
	// MinBlockRecords: a rewritten block with fewer records is merged with a
	// neighbour (default MaxBlockRecords/4).
	MinBlockRecords int
}

// DefaultConfig returns the documented defaults (those NewStore fills in
// for zero fields): 4096 and 1024 records.
func DefaultConfig() Config { return Config{}.withDefaults() }

// RegisterFlags registers --max-block-records and --min-block-records on fs
// with c's values as defaults.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.MaxBlockRecords, "max-block-records", c.MaxBlockRecords, "records at which a segment block is split")
	fs.IntVar(&c.MinBlockRecords, "min-block-records", c.MinBlockRecords, "records under which a rewritten block is merged with a neighbour (at most half of --max-block-records)")
}

// Validate rejects sizes NewStore would clamp: MaxBlockRecords under 2,
// MinBlockRecords under 1 or above MaxBlockRecords/2. Errors name the flag.
func (c Config) Validate() error {
	switch {
	case c.MaxBlockRecords < minMaxBlockRecords:
		return fmt.Errorf("--max-block-records must be at least %d, got %d", minMaxBlockRecords, c.MaxBlockRecords)
	case c.MinBlockRecords < 1 || c.MinBlockRecords > c.MaxBlockRecords/2:
		return fmt.Errorf("--min-block-records must be in 1..%d (half of --max-block-records), got %d", c.MaxBlockRecords/2, c.MinBlockRecords)
	}
	return nil
}
