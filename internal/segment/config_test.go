package segment_test

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/compactorhq/compactor/internal/segment"
)

func TestConfigDefaultsFlagsAndValidate(t *testing.T) {
	cfg := segment.DefaultConfig()
	if cfg.MaxBlockRecords != 4096 || cfg.MinBlockRecords != 1024 {
		t.Fatalf("defaults %+v, want 4096 and 1024", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse([]string{"--max-block-records", "100", "--min-block-records", "50"}); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxBlockRecords != 100 || cfg.MinBlockRecords != 50 || cfg.Validate() != nil {
		t.Fatalf("parsed %+v (%v), want 100 and 50, valid", cfg, cfg.Validate())
	}
	for _, tc := range []struct {
		cfg  segment.Config
		want string
	}{
		{segment.Config{MaxBlockRecords: 1, MinBlockRecords: 1}, "--max-block-records"},
		{segment.Config{MaxBlockRecords: 100, MinBlockRecords: 0}, "--min-block-records"},
		{segment.Config{MaxBlockRecords: 100, MinBlockRecords: 51}, "--min-block-records"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}
