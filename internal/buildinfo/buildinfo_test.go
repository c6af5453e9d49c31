package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromReadsVCSStampingAndLinkTimeValuesWin(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/compactorhq/compactor", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "3f2c9a1b7d4e5f60718293a4b5c6d7e8f9012345"},
			{Key: "vcs.time", Value: "2026-11-30T09:12:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		o    Overrides
		want Info
		line string
	}{
		{
			name: "no build information at all",
			want: Info{Version: "(devel)", Revision: Unknown, Time: Unknown, GoVersion: Unknown},
			line: "compactor (devel) (revision unknown, built unknown, unknown)",
		},
		{
			name: "a go build in a modified git checkout",
			bi:   stamped,
			want: Info{Version: "(devel)", Revision: "3f2c9a1b7d4e5f60718293a4b5c6d7e8f9012345", Time: "2026-11-30T09:12:00Z", Modified: true, GoVersion: "go1.26.8"},
			line: "compactor (devel) (revision 3f2c9a1b7d4e, modified, built 2026-11-30T09:12:00Z, go1.26.8)",
		},
		{
			name: "a container build stamped with -ldflags -X",
			bi:   stamped,
			o:    Overrides{Version: "v1.4.0", Revision: "aaaabbbbccccdddd", Time: "2026-12-01T00:00:00Z", Modified: "false"},
			want: Info{Version: "v1.4.0", Revision: "aaaabbbbccccdddd", Time: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8"},
			line: "compactor v1.4.0 (revision aaaabbbbcccc, built 2026-12-01T00:00:00Z, go1.26.8)",
		},
		{
			name: "go install of a tagged module",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.3.2"}},
			want: Info{Version: "v1.3.2", Revision: Unknown, Time: Unknown, GoVersion: "go1.26.8"},
			line: "compactor v1.3.2 (revision unknown, built unknown, go1.26.8)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := From(tc.bi, tc.o)
			if got != tc.want {
				t.Errorf("From = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.line {
				t.Errorf("String = %q, want %q", s, tc.line)
			}
		})
	}
}
