package server

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/decisionledger/ledger/internal/tlogtiles"
	"github.com/decisionledger/ledger/ledger"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	tlogformat "github.com/transparency-dev/formats/log"
)

// The ledger's tiles are the width tlog-tiles paths spell.
func TestTileWidth(t *testing.T) {
	if ledger.TileWidth != tlogtiles.Width {
		t.Errorf("ledger.TileWidth %d, tlogtiles.Width %d", ledger.TileWidth, tlogtiles.Width)
	}
}

// tileServer maps golang.org/x/mod/sumdb/tlog's tile paths (which carry
// the height, tile/8/L/N) to ours (tile/L/N).
type tileServer struct {
	t   *testing.T
	url string
}

func (s tileServer) Height() int { return 8 }

func (s tileServer) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	data := make([][]byte, len(tiles))
	for i, tile := range tiles {
		path := "tile/" + strings.TrimPrefix(tile.Path(), "tile/8/")
		resp, err := http.Get(s.url + "/" + path)
		if err != nil {
			return nil, err
		}
		data[i], _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
		}
	}
	return data, nil
}

func (s tileServer) SaveTiles([]tlog.Tile, [][]byte) {}

// The tree root recomputed from the served tiles by sumdb/tlog, code we
// did not write, equals the served checkpoint's root; entry bundles hold
// exactly the entries.
func TestTilesInterop(t *testing.T) {
	s := startServer(t)
	const n = 70000 // three tile levels: 70000 leaves, 273 level-1 hashes, 1 level-2 hash
	for i := 0; i < n; i += 700 {
		var wg = make(chan error, 700)
		for j := range 700 {
			go func() {
				c := apitest.AppendBody(i + j)
				_, err := s.l.Append(context.Background(), apitest.Record(t, c))
				wg <- err
			}()
		}
		for range 700 {
			if err := <-wg; err != nil {
				t.Fatal(err)
			}
		}
	}
	signed, err := s.l.Publish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, _ := note.NewVerifier(s.key.VerifierKey())
	cp, _, _, err := tlogformat.ParseCheckpoint(signed, s.key.Name(), v)
	if err != nil {
		t.Fatal(err)
	}
	served := apitest.Get(t, s.url+"/checkpoint")
	if served != string(signed) {
		t.Fatal("the tiles API serves another checkpoint")
	}
	var root tlog.Hash
	copy(root[:], cp.Hash)
	reader := tlog.TileHashReader(tlog.Tree{N: int64(cp.Size), Hash: root}, tileServer{t, s.url})
	got, err := tlog.TreeHash(int64(cp.Size), reader)
	if err != nil {
		t.Fatalf("sumdb/tlog reading our tiles: %v", err)
	}
	if got != root {
		t.Fatalf("tlog tree hash %x, checkpoint root %x", got, root)
	}
	// Entry bundles: a full one and the partial last one.
	for _, c := range []struct {
		path  string
		first uint64
		count int
	}{{"tile/entries/001", 256, 256}, {fmt.Sprintf("tile/entries/%s.p/%d", tlogtiles.IndexPath(n/256), n%256), n / 256 * 256, n % 256}} {
		resp, err := http.Get(s.url + "/" + c.path)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", c.path, err, resp.Status)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for i := range c.count {
			l := int(binary.BigEndian.Uint16(b))
			want, _ := s.l.Entry(context.Background(), c.first+uint64(i))
			if string(b[2:2+l]) != string(want) {
				t.Fatalf("%s: entry %d differs", c.path, i)
			}
			b = b[2+l:]
		}
		if len(b) != 0 {
			t.Fatalf("%s: %d bytes after the entries", c.path, len(b))
		}
	}
	// Beyond the checkpoint, and a malformed path: 404.
	for _, p := range []string{fmt.Sprintf("tile/entries/%s", tlogtiles.IndexPath(n/256)), "tile/0/x001/000", "tile/0/1"} {
		if resp, _ := http.Get(s.url + "/" + p); resp.StatusCode != 404 {
			t.Errorf("%s: HTTP %d", p, resp.StatusCode)
		}
	}
}
