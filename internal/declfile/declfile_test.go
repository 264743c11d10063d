package declfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRead(t *testing.T) {
	good := "../../testdata/declarations/send_email.json"
	files, err := Read([]string{good, "../../testdata/declarations/make_payment.json"})
	if err != nil || len(files) != 2 || files[0].Decl.Action != "send_email" || files[0].Path != good {
		t.Fatalf("Read: %v, %+v", err, files)
	}
	want, _ := os.ReadFile(good)
	if string(files[0].Data) != string(want) {
		t.Error("Data is not the file's bytes")
	}
	if _, err := CompileSchema(files[1].Decl); err != nil {
		t.Errorf("CompileSchema: %v", err)
	}

	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"declaration":1}`), 0o600)
	for name, paths := range map[string][]string{
		"unparsable": {bad},
		"duplicate":  {good, good},
	} {
		if _, err := Read(paths); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Read([]string{filepath.Join(t.TempDir(), "missing.json")}); err == nil || errors.Is(err, ErrRefused) {
		t.Errorf("a missing file: %v", err)
	}
}
