// Proofs (docs/api.md "Read"):
//
//	GET /v1/proofs/{index}  a C2SP tlog-proof file
//	GET /v1/inclusion       an inclusion proof
//	GET /v1/consistency     a consistency proof

package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/decisionledger/ledger/ledger"
)

func (s *server) tlogProof(w http.ResponseWriter, r *http.Request) {
	index, ok := parseIndex(w, r.PathValue("index"), "the index")
	if !ok {
		return
	}
	b, err := s.l.TlogProof(r.Context(), index, 0)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", "no entry %d under the latest checkpoint", index)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(b)
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

// treeSize reads the size parameter; absent, the latest checkpoint's.
func (s *server) treeSize(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	if text := r.URL.Query().Get("tree_size"); text != "" {
		return parseIndex(w, text, "tree_size")
	}
	_, size := s.l.Checkpoint()
	return size, true
}

// inclusion answers GET /v1/inclusion?index=N or ?leaf_hash=HEX, with
// optional tree_size (default: the latest checkpoint's).
func (s *server) inclusion(w http.ResponseWriter, r *http.Request) {
	size, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	var index uint64
	var hashes [][]byte
	var err error
	switch {
	case q.Get("leaf_hash") != "":
		raw, herr := hex.DecodeString(q.Get("leaf_hash"))
		if herr != nil || len(raw) != ledger.HashSize {
			writeError(w, http.StatusBadRequest, "invalid_request", "leaf_hash is not 64 hex digits")
			return
		}
		index, hashes, err = s.l.InclusionProofByHash(r.Context(), [ledger.HashSize]byte(raw), size)
	default:
		if index, ok = parseIndex(w, q.Get("index"), "index"); !ok {
			return
		}
		hashes, err = s.l.InclusionProof(r.Context(), index, size)
	}
	if err != nil {
		writeProofError(w, err)
		return
	}
	writeProof(w, proofJSON{Index: &index, TreeSize: size, Hashes: hashes})
}

// consistency answers GET /v1/consistency?size1=M[&tree_size=N].
func (s *server) consistency(w http.ResponseWriter, r *http.Request) {
	size, ok := s.treeSize(w, r)
	if !ok {
		return
	}
	size1, ok := parseIndex(w, r.URL.Query().Get("size1"), "size1")
	if !ok {
		return
	}
	hashes, err := s.l.ConsistencyProof(r.Context(), size1, size)
	if err != nil {
		writeProofError(w, err)
		return
	}
	writeProof(w, proofJSON{Size1: &size1, TreeSize: size, Hashes: hashes})
}

func writeProofError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ledger.ErrSize):
		writeError(w, http.StatusBadRequest, "out_of_range", "sizes and indices must lie within the latest checkpoint's tree")
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no such entry")
	default:
		writeError(w, http.StatusInternalServerError, "internal", "the proof could not be read")
	}
}
