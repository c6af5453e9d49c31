// Package buildinfo says which build of the compactor is running: version,
// VCS revision, build time and whether the working tree had local changes.
//
// The figures come from the Go toolchain's build information
// (runtime/debug.ReadBuildInfo: the module version, and the VCS stamping of
// `go build` in a git checkout: vcs.revision, vcs.time, vcs.modified), and
// can be overridden at link time, which is how a build without a .git
// directory (a container build) is stamped:
//
//	go build -ldflags "-X github.com/compactorhq/compactor/internal/buildinfo.version=v1.4.0 \
//	  -X github.com/compactorhq/compactor/internal/buildinfo.revision=$(git rev-parse HEAD) \
//	  -X github.com/compactorhq/compactor/internal/buildinfo.buildTime=$(date -u +%Y-%m-%dT%H:%M:%SZ)" ./cmd/compactor
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Set by the linker (-ldflags -X); empty when not given. These are the only
// package-level variables of the project, because -X can set nothing else.
var (
	version   string
	revision  string
	buildTime string // RFC 3339
	modified  string // "true" or "false"
)

// Unknown is the value of a field the build did not record.
const Unknown = "unknown"

// Info describes one build.
type Info struct {
	// Version is the release (a module version such as v1.4.0, or what
	// -X ...buildinfo.version gave); "(devel)" for a build from a
	// checkout without one.
	Version string
	// Revision is the VCS commit (full hash), Unknown when not recorded.
	Revision string
	// Time is the commit time (vcs.time) or the -X build time, RFC 3339;
	// Unknown when not recorded.
	Time string
	// Modified: the working tree had uncommitted changes (vcs.modified).
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Get returns the information of the running binary.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi, Overrides{Version: version, Revision: revision, Time: buildTime, Modified: modified})
}

// Overrides are the link-time values; empty ones leave the build
// information's.
type Overrides struct {
	Version, Revision, Time string
	Modified                string // "true" or "false"
}

// From merges the toolchain's build information bi (nil: none) with the
// link-time overrides.
func From(bi *debug.BuildInfo, o Overrides) Info {
	i := Info{Version: "(devel)", Revision: Unknown, Time: Unknown, GoVersion: Unknown}
	if bi != nil {
		i.GoVersion = bi.GoVersion
		if v := bi.Main.Version; v != "" {
			i.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if o.Version != "" {
		i.Version = o.Version
	}
	if o.Revision != "" {
		i.Revision = o.Revision
	}
	if o.Time != "" {
		i.Time = o.Time
	}
	if o.Modified != "" {
		i.Modified = o.Modified == "true"
	}
	return i
}

// ShortRevision is the first 12 characters of the revision.
func (i Info) ShortRevision() string {
	if len(i.Revision) > 12 {
		return i.Revision[:12]
	}
	return i.Revision
}

// String is the one-line form `compactor version` prints, e.g.
// "compactor v1.4.0 (revision 3f2c9a1b7d4e, 2026-11-30T09:12:00Z, go1.26.8)",
// with ", modified" after the revision for a tree with local changes.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "compactor %s (revision %s", i.Version, i.ShortRevision())
	if i.Modified {
		b.WriteString(", modified")
	}
	fmt.Fprintf(&b, ", built %s, %s)", i.Time, i.GoVersion)
	return b.String()
}
