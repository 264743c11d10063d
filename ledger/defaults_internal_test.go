package ledger

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The default checkpoint interval is the one the package doc and
// docs/log.md state.
func TestDefaultCheckpointIntervalDocumented(t *testing.T) {
	if got := (Options{}).withDefaults().CheckpointInterval; got != DefaultCheckpointInterval {
		t.Fatalf("the zero Options get CheckpointInterval %v; want DefaultCheckpointInterval, %v", got, DefaultCheckpointInterval)
	}
	if got := (Options{CheckpointInterval: -1}).withDefaults().CheckpointInterval; got != -1 {
		t.Fatalf("a negative CheckpointInterval became %v; want it kept (no publish loop)", got)
	}
	ms := fmt.Sprintf("%d ms", DefaultCheckpointInterval.Milliseconds())
	for path, want := range map[string]string{
		"doc.go":         "CheckpointInterval (" + ms + ")",
		"../docs/log.md": "interval (" + ms + " by default, `checkpoint_interval`)",
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(strings.ReplaceAll(string(b), "//", "")), " "), want) {
			t.Errorf("%s does not state the default checkpoint interval as %q", path, want)
		}
	}
}
