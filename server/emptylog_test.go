package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A new ledgerd serves the empty tree's checkpoint before any append, so
// a monitor or witness can start from size 0.
func TestEmptyLogServesCheckpoint(t *testing.T) {
	s := startServer(t)
	resp, err := http.Get(s.url + "/v1/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	lines := strings.SplitN(string(body), "\n", 4)
	if resp.StatusCode != http.StatusOK || len(lines) < 3 || lines[1] != "0" || lines[2] != "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" {
		t.Fatalf("GET /v1/checkpoint of a new log: HTTP %d\n%s\nwant 200 and the empty tree's checkpoint", resp.StatusCode, body)
	}
}
