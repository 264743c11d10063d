// Proofs (docs/api.md "Read"):
//
//	GET /v1/proofs/{index}  a C2SP tlog-proof file
//	GET /v1/inclusion       an inclusion proof
//	GET /v1/consistency     a consistency proof

package server

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/decisionledger/ledger/ledger"
)

func (s *Server) tlogProof(w http.ResponseWriter, r *http.Request) {
	index, ok := parseIndex(w, r.PathValue("index"), "the index")
	if !ok {
		return
	}
	size, given, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	if index >= size {
		WriteError(w, http.StatusNotFound, "not_found", "no entry at this index under %s", checkpointName(given))
		return
	}
	b, err := s.l.TlogProof(r.Context(), index, size)
	switch {
	case s.damaged(w, r, err, "the proof"):
		return
	case errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrSize):
		WriteError(w, http.StatusNotFound, "not_found", "no entry at this index under %s", checkpointName(given))
		return
	case err != nil:
		WriteError(w, http.StatusInternalServerError, "internal", "the proof could not be read")
		return
	}
	// The file ends with the signed checkpoint: the cosignatures follow
	// as extra signature lines.
	lines, _ := s.wit.Cosignatures(r.Context(), size)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(append(b, lines...))
}

// proofJSON is the body of the proof endpoints: hashes in standard base64.
type proofJSON struct {
	Index    *uint64  `json:"index,omitempty"`
	Size1    *uint64  `json:"size1,omitempty"`
	TreeSize uint64   `json:"tree_size"`
	Hashes   [][]byte `json:"hashes"`
}

func writeProof(w http.ResponseWriter, p proofJSON) {
	if p.Hashes == nil {
		p.Hashes = [][]byte{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(p)
}

// treeSize reads the tree_size parameter (given true); absent, it is the
// latest checkpoint's size. A size beyond that is refused, and so is one
// the log signed no checkpoint for: every proof and export is made to a
// tree whose signed checkpoint GET /v1/checkpoints/{size} serves.
func (s *Server) treeSize(w http.ResponseWriter, r *http.Request) (size uint64, given, ok bool) {
	_, latest := s.l.Checkpoint()
	text := r.URL.Query().Get("tree_size")
	if text == "" {
		return latest, false, true
	}
	if size, ok = parseIndex(w, text, "tree_size"); !ok {
		return 0, true, false
	}
	if size > latest {
		WriteError(w, http.StatusBadRequest, "out_of_range", "tree_size must not exceed %d, the latest checkpoint's size", latest)
		return 0, true, false
	}
	if _, err := s.signedAt(r.Context(), size); err != nil {
		s.writeSignedAtError(w, r, err, "tree_size")
		return 0, true, false
	}
	return size, true, true
}

// checkpointName names the checkpoint a request is answered at.
func checkpointName(given bool) string {
	if given {
		return "the checkpoint of tree_size"
	}
	return "the latest checkpoint"
}

// sizeBound names the bound a parameter broke: tree_size if the request
// gave it (never repeated), or the latest checkpoint's size.
func sizeBound(size uint64, given bool) string {
	if given {
		return "tree_size"
	}
	return fmt.Sprintf("%d, the latest checkpoint's size", size)
}

// inclusion answers GET /v1/inclusion?index=N or ?leaf_hash=HEX, with
// optional tree_size (default: the latest checkpoint's).
func (s *Server) inclusion(w http.ResponseWriter, r *http.Request) {
	size, given, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var index uint64
	var hashes [][]byte
	var err error
	switch leafHash := q.Get("leaf_hash"); {
	case leafHash != "" && q.Get("index") != "":
		WriteError(w, http.StatusBadRequest, "invalid_request", "give index or leaf_hash, not both")
		return
	case leafHash != "":
		raw, herr := hex.DecodeString(leafHash)
		if herr != nil || len(raw) != ledger.HashSize {
			WriteError(w, http.StatusBadRequest, "invalid_request", "leaf_hash is not 64 hex digits")
			return
		}
		index, hashes, err = s.l.InclusionProofByHash(r.Context(), [ledger.HashSize]byte(raw), size)
		if s.damaged(w, r, err, "the proof") {
			return
		}
		if errors.Is(err, ledger.ErrNotFound) {
			WriteError(w, http.StatusNotFound, "not_found", "no entry has this leaf_hash in the tree")
			return
		}
	case q.Get("index") == "":
		WriteError(w, http.StatusBadRequest, "invalid_request", "index or leaf_hash is missing")
		return
	default:
		if index, ok = parseIndex(w, q.Get("index"), "index"); !ok {
			return
		}
		if index >= size {
			WriteError(w, http.StatusBadRequest, "out_of_range", "index must be below %s", sizeBound(size, given))
			return
		}
		hashes, err = s.l.InclusionProof(r.Context(), index, size)
	}
	if err != nil {
		s.writeProofError(w, r, err)
		return
	}
	writeProof(w, proofJSON{Index: &index, TreeSize: size, Hashes: hashes})
}

// consistency answers GET /v1/consistency?size1=M[&tree_size=N].
func (s *Server) consistency(w http.ResponseWriter, r *http.Request) {
	size, given, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	size1, ok := parseIndex(w, r.URL.Query().Get("size1"), "size1")
	if !ok {
		return
	}
	if size1 > size {
		WriteError(w, http.StatusBadRequest, "out_of_range", "size1 must not exceed %s", sizeBound(size, given))
		return
	}
	hashes, err := s.l.ConsistencyProof(r.Context(), size1, size)
	if err != nil {
		s.writeProofError(w, r, err)
		return
	}
	writeProof(w, proofJSON{Size1: &size1, TreeSize: size, Hashes: hashes})
}

func (s *Server) writeProofError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case s.damaged(w, r, err, "the proof"):
	case errors.Is(err, ledger.ErrSize):
		WriteError(w, http.StatusBadRequest, "out_of_range", "sizes and indices must lie within the latest checkpoint's tree")
	case errors.Is(err, ledger.ErrNotFound):
		WriteError(w, http.StatusNotFound, "not_found", "no such entry")
	default:
		WriteError(w, http.StatusInternalServerError, "internal", "the proof could not be read")
	}
}
