// Checkpoints (docs/api.md "Read", and the tlog-tiles checkpoint):
//
//	GET /v1/checkpoint
//	GET /v1/checkpoints/{size}
//	GET <tiles prefix>/checkpoint

package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/decisionledger/ledger/ledger"
)

func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	cp, size := s.l.Checkpoint()
	if cp == nil {
		// Only a ledger opened without its first checkpoint (ledger.Open
		// signs one) has none.
		WriteError(w, http.StatusNotFound, "no_checkpoint", "no checkpoint has been signed yet")
		return
	}
	s.writeCheckpoint(w, r, cp, size, "no-cache")
}

// checkpointAt answers GET /v1/checkpoints/{size}: the checkpoint the log
// signed for exactly that tree size. The signed note never changes; the
// cosignatures ledgerd holds for it may grow (and it keeps them only for
// recent sizes), so it is served as immutable only without witnesses.
func (s *Server) checkpointAt(w http.ResponseWriter, r *http.Request) {
	size, ok := parseIndex(w, r.PathValue("size"), "the size")
	if !ok {
		return
	}
	cp, err := s.signedAt(r.Context(), size)
	if err != nil {
		s.writeSignedAtError(w, r, err, "the size")
		return
	}
	cache := "public, max-age=31536000, immutable"
	if s.wit != nil {
		cache = "no-cache"
	}
	s.writeCheckpoint(w, r, cp, size, cache)
}

// writeCheckpoint writes the signed checkpoint cp of size with the
// witnesses' cosignatures gathered so far for it, as extra signature
// lines (C2SP tlog-cosignature).
func (s *Server) writeCheckpoint(w http.ResponseWriter, r *http.Request, cp []byte, size uint64, cacheControl string) {
	lines, n := s.wit.Cosignatures(r.Context(), size)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", cacheControl)
	if s.wit != nil {
		w.Header().Set("Ledger-Cosignatures", strconv.Itoa(n))
	}
	w.Write(append(cp, lines...))
}

// errNotSigned: the log signed no checkpoint for a size (it signs about
// one per checkpoint_interval while the tree grows, not one per entry).
var errNotSigned = errors.New("no checkpoint signed for this size")

// signedAt returns the checkpoint the log signed for exactly size:
// errNotSigned if it signed none (or size is beyond the latest).
func (s *Server) signedAt(ctx context.Context, size uint64) ([]byte, error) {
	if _, latest := s.l.Checkpoint(); size > latest {
		return nil, errNotSigned
	}
	cp, err := s.l.CheckpointAt(ctx, size)
	if errors.Is(err, ledger.ErrNotFound) && !errors.Is(err, ledger.ErrCorrupt) {
		return nil, errNotSigned
	}
	return cp, err
}

// writeSignedAtError answers a signedAt error for the parameter what. The
// message names the latest size, not the one asked for (refusals never
// repeat what was sent).
func (s *Server) writeSignedAtError(w http.ResponseWriter, r *http.Request, err error, what string) {
	if s.damaged(w, r, err, "the checkpoint") {
		return
	}
	if errors.Is(err, errNotSigned) {
		_, latest := s.l.Checkpoint()
		WriteError(w, http.StatusNotFound, "not_found",
			"the log signed no checkpoint for %s: it signs one when the tree has grown, at most one per checkpoint_interval, not one per entry; the latest is of size %d (GET /v1/checkpoint)", what, latest)
		return
	}
	WriteError(w, http.StatusInternalServerError, "internal", "the checkpoint could not be read")
}
