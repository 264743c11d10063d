package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build information", nil, "(devel), unknown revision, " + runtime.Version() + " " + platform},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/decisionledger/ledger", Version: "(devel)"}},
			"(devel), unknown revision, go1.26.8 " + platform},
		{"test binary", &debug.BuildInfo{GoVersion: "go1.26.8"}, "(devel), unknown revision, go1.26.8 " + platform},
		{"release", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/decisionledger/ledger", Version: "v1.2.0"},
			Settings: []debug.BuildSetting{
				{Key: "vcs", Value: "git"},
				{Key: "vcs.revision", Value: "3f1c0a6f5b0e4d2c9a8b7c6d5e4f3a2b1c0d9e8f"},
				{Key: "vcs.time", Value: "2026-05-01T10:00:00Z"},
				{Key: "vcs.modified", Value: "false"},
			}},
			"v1.2.0, revision 3f1c0a6f5b0e4d2c9a8b7c6d5e4f3a2b1c0d9e8f, 2026-05-01T10:00:00Z, go1.26.8 " + platform},
		{"modified checkout", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "github.com/decisionledger/ledger", Version: "v1.2.1-0.20260501100000-3f1c0a6f5b0e+dirty"},
			Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "3f1c0a6f5b0e4d2c9a8b7c6d5e4f3a2b1c0d9e8f"},
				{Key: "vcs.modified", Value: "true"},
			}},
			"v1.2.1-0.20260501100000-3f1c0a6f5b0e+dirty, revision 3f1c0a6f5b0e4d2c9a8b7c6d5e4f3a2b1c0d9e8f, modified, go1.26.8 " + platform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.bi).String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The running test binary has build information; Line names the command
// and the toolchain.
func TestLine(t *testing.T) {
	got := Line("ledgerd")
	if !strings.HasPrefix(got, "ledgerd ") || !strings.Contains(got, runtime.Version()) || strings.Contains(got, "\n") {
		t.Errorf("Line = %q", got)
	}
}
