// Package buildinfo says which build of this module a command is, from
// the build information Go records in every binary
// (runtime/debug.ReadBuildInfo): the module version and the version
// control revision. The commands' --version output comes from here, so
// that ledgerd, ledger-verify and ledger-declare answer alike:
//
//	ledgerd v1.2.0, revision 3f1c…(40 hex digits), 2026-05-01T10:00:00Z, go1.26.8 linux/amd64
//	ledgerd (devel), unknown revision, go1.26.8 linux/amd64
//
// The version is "(devel)" for a binary built from a checkout rather than
// installed at a module version (go install …@v1.2.0); the revision is
// unknown when Go recorded none (go build -buildvcs=false, or a build
// outside a VCS checkout). "modified" follows the revision when the
// checkout had uncommitted changes.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a binary records about its own build. A string field is ""
// when nothing was recorded.
type Info struct {
	// Version is the main module's version: a release ("v1.2.0"), a
	// pseudo-version, or "(devel)".
	Version string
	// Revision, Time and Modified describe the VCS checkout the binary
	// was built from: the commit's revision and its time (RFC 3339), and
	// whether the work tree had uncommitted changes.
	Revision string
	Time     string
	Modified bool
	// GoVersion is the Go toolchain that built the binary ("go1.26.8").
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo() // nil when there is none
	return fromBuildInfo(bi)
}

// fromBuildInfo extracts Info from bi, which may be nil.
func fromBuildInfo(bi *debug.BuildInfo) Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version()}
	if bi == nil {
		return i
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
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
	return i
}

// String formats i as one line, as the package doc shows, with the
// operating system and architecture the binary runs on.
func (i Info) String() string {
	parts := []string{i.Version}
	if i.Revision == "" {
		parts = append(parts, "unknown revision")
	} else {
		parts = append(parts, "revision "+i.Revision)
		if i.Time != "" {
			parts = append(parts, i.Time)
		}
		if i.Modified {
			parts = append(parts, "modified")
		}
	}
	parts = append(parts, i.GoVersion+" "+runtime.GOOS+"/"+runtime.GOARCH)
	return strings.Join(parts, ", ")
}

// Line is the --version output of the command name: its name, then Read's
// String.
func Line(name string) string {
	return name + " " + Read().String()
}
