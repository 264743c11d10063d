package verify

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/decisionledger/ledger/entry"
	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
)

// CheckInclusion: the entry is in the checkpoint's tree at its index.
const CheckInclusion Check = "inclusion"

const tlogProofHeader = "c2sp.org/tlog-proof@v1\n"

// maxTlogProof bounds a tlog-proof file: one entry in base64, 64 proof
// hashes and a checkpoint.
const maxTlogProof = 4*entry.MaxEntryBytes/3 + 64*64 + maxCheckpoint + 256

// TlogProof is a parsed C2SP tlog-proof@v1 file.
type TlogProof struct {
	Extra      []byte // the signed entry, for proofs this ledger writes
	Index      uint64
	Proof      [][]byte
	Checkpoint []byte // the signed checkpoint, verbatim
}

// ParseTlogProof parses a tlog-proof@v1 file strictly: every line in its
// one accepted spelling (canonical base64, no leading zeros), nothing
// before or after. It checks no signature or hash.
func ParseTlogProof(b []byte) (*TlogProof, error) {
	fail := func(format string, args ...any) (*TlogProof, error) {
		return nil, &Failure{Index: NoIndex, Part: "tlog-proof", Check: CheckFormat, Err: fmt.Errorf(format, args...)}
	}
	if len(b) > maxTlogProof {
		return fail("longer than %d bytes", maxTlogProof)
	}
	rest, ok := bytes.CutPrefix(b, []byte(tlogProofHeader))
	if !ok {
		return fail("not a c2sp.org/tlog-proof@v1 file")
	}
	head, cp, ok := bytes.Cut(rest, []byte("\n\n"))
	if !ok {
		return fail("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	p := &TlogProof{Checkpoint: cp}
	if after, ok := strings.CutPrefix(lines[0], "extra "); ok {
		extra, err := base64.StdEncoding.Strict().DecodeString(after)
		if err != nil || base64.StdEncoding.EncodeToString(extra) != after || len(extra) == 0 {
			return fail("extra line is not canonical base64")
		}
		p.Extra = extra
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return fail("no index line")
	}
	indexText, ok := strings.CutPrefix(lines[0], "index ")
	index, err := strconv.ParseUint(indexText, 10, 64)
	if !ok || err != nil || strconv.FormatUint(index, 10) != indexText {
		return fail("index line is not \"index <decimal>\"")
	}
	p.Index = index
	for i, line := range lines[1:] {
		h, err := base64.StdEncoding.Strict().DecodeString(line)
		if err != nil || len(h) != hasher.Size() || base64.StdEncoding.EncodeToString(h) != line {
			return fail("proof line %d is not a base64 SHA-256 hash", i+1)
		}
		p.Proof = append(p.Proof, h)
	}
	if len(p.Proof) > 64 {
		return fail("more than 64 proof hashes")
	}
	return p, nil
}

// VerifyTlogProof verifies a tlog-proof file this ledger wrote: the
// checkpoint with the trusted key, the entry carried as extra data (strict
// encoding, key, signature, index), and its inclusion at that index in the
// checkpoint's tree. It returns the verified entry and checkpoint.
func VerifyTlogProof(b []byte, key *Key) (*entry.Entry, *log.Checkpoint, error) {
	p, err := ParseTlogProof(b)
	if err != nil {
		return nil, nil, err
	}
	cp, err := key.Checkpoint(p.Checkpoint)
	if err != nil {
		return nil, nil, err
	}
	index := int64(p.Index)
	if p.Extra == nil {
		return nil, nil, &Failure{Index: index, Check: CheckEntryEncoding, Err: errors.New("the proof carries no entry (extra line)")}
	}
	e, err := entry.Parse(p.Extra)
	if err != nil {
		return nil, nil, &Failure{Index: index, Check: CheckEntryEncoding, Err: err}
	}
	if e.Index != p.Index {
		return nil, nil, &Failure{Index: index, Check: CheckIndex, Err: fmt.Errorf("entry says index %d", e.Index)}
	}
	if e.Origin != key.origin {
		return nil, nil, &Failure{Index: index, Check: CheckEntryKey, Err: errors.New("entry names another log origin")}
	}
	if err := key.verifyEntrySignature(e); err != nil {
		return nil, nil, &Failure{Index: index, Check: entryKeyCheck(err), Err: err}
	}
	if err := proof.VerifyInclusion(hasher, p.Index, cp.Size, hasher.HashLeaf(p.Extra), p.Proof, cp.Hash); err != nil {
		return nil, nil, &Failure{Index: index, Check: CheckInclusion, Err: err}
	}
	return e, cp, nil
}

// Marshal returns the file's bytes in the one spelling ParseTlogProof
// accepts.
func (p *TlogProof) Marshal() []byte {
	var b bytes.Buffer
	b.WriteString(tlogProofHeader)
	if p.Extra != nil {
		b.WriteString("extra " + base64.StdEncoding.EncodeToString(p.Extra) + "\n")
	}
	fmt.Fprintf(&b, "index %d\n", p.Index)
	for _, h := range p.Proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h) + "\n")
	}
	b.WriteByte('\n')
	b.Write(p.Checkpoint)
	return b.Bytes()
}
