package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/verify"
	tlog "github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// hostileKey is a ledger key in the hands of whoever runs the ledger: it
// signs entries the entry package refuses to build, written by hand.
type hostileKey struct {
	name   string
	vkey   string
	signer note.Signer
	priv   ed25519.PrivateKey
}

func newHostileKey(name string) (*hostileKey, error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return nil, err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, err
	}
	// The note key's own Ed25519 key signs the entries: algorithm byte,
	// then the seed, in the skey's last field (44 characters of base64).
	raw, err := base64.StdEncoding.DecodeString(skey[len(skey)-44:])
	if err != nil {
		return nil, err
	}
	return &hostileKey{name: name, vkey: vkey, signer: signer, priv: ed25519.NewKeyFromSeed(raw[1:])}, nil
}

// entries returns n signed, chained entries with the given attributes;
// edit, if not nil, rewrites each signed message before it is signed.
func (k *hostileKey) entries(n int, attrs string, edit func(index int, message []byte) []byte) ([][]byte, error) {
	c, err := commit.Params([]byte(`{"amount_minor":100,"payee":"DE00000000000000000001"}`))
	if err != nil {
		return nil, err
	}
	// The origin and key id are written in by hand too, the key name
	// being anything note admits.
	const placeholder = "origin.placeholder.example"
	name, err := commit.AppendString(nil, k.name)
	if err != nil {
		return nil, err
	}
	name = name[:len(name)-1] // the opening quote and the name
	var out [][]byte
	var prev commit.Digest
	for i := range n {
		e := &entry.Entry{Origin: placeholder, Index: uint64(i),
			Time:     time.Date(2026, 11, 30, 12, 0, 0, i*1000, time.UTC),
			Mediator: "mediator-1", Principal: "agent-1", Action: "make_payment", Decision: entry.Allow,
			Policies: []string{"payments.limit"}, Params: c, Tiers: sha256.Sum256([]byte("tiers")),
			Prev: prev, KeyID: fmt.Sprintf("%s+%08x", placeholder, k.signer.KeyHash())}
		if err := e.SetAttributes([]byte(attrs)); err != nil {
			return nil, err
		}
		m, err := e.SignedMessage()
		if err != nil {
			return nil, err
		}
		m = bytes.ReplaceAll(m, []byte(`"`+placeholder), name)
		if edit != nil {
			m = edit(i, m)
		}
		b, err := entry.SignedEntry(m, ed25519.Sign(k.priv, m))
		if err != nil {
			return nil, err
		}
		out, prev = append(out, b), sha256.Sum256(m)
	}
	return out, nil
}

// checkpoint signs the checkpoint of the tree whose leaves are entries.
func (k *hostileKey) checkpoint(entries [][]byte) ([]byte, error) {
	h := rfc6962.DefaultHasher
	rng := (&compact.RangeFactory{Hash: h.HashChildren}).NewEmptyRange(0)
	for _, b := range entries {
		if err := rng.Append(h.HashLeaf(b), nil); err != nil {
			return nil, err
		}
	}
	root := h.EmptyRoot()
	if len(entries) > 0 {
		var err error
		if root, err = rng.GetRootHash(nil); err != nil {
			return nil, err
		}
	}
	return note.Sign(&note.Note{Text: string(tlog.Checkpoint{Origin: k.name, Size: uint64(len(entries)), Hash: root}.Marshal())}, k.signer)
}

// export is an export file of every entry of a log.
func (k *hostileKey) export(entries [][]byte) ([]byte, error) {
	cp, err := k.checkpoint(entries)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	frame := func(tag string, p []byte) {
		fmt.Fprintf(&b, "%s %d\n", tag, len(p))
		b.Write(p)
		b.WriteByte('\n')
	}
	b.WriteString(verify.ExportHeader)
	frame("checkpoint", cp)
	frame("range", []byte("0 "+strconv.Itoa(len(entries))))
	frame("left", nil)
	frame("right", nil)
	for _, e := range entries {
		frame("entry", e)
	}
	frame("end", nil)
	return b.Bytes(), nil
}

// tlogProof is a tlog-proof file of the only entry of a log of one.
func (k *hostileKey) tlogProof(e []byte) ([]byte, error) {
	cp, err := k.checkpoint([][]byte{e})
	if err != nil {
		return nil, err
	}
	return (&verify.TlogProof{Extra: e, Index: 0, Checkpoint: cp}).Marshal(), nil
}

// escapes is what a hostile input tries to put on an auditor's terminal:
// clear the screen, move home, write a false verdict; a C1 CSI; a
// right-to-left override.
const (
	escText    = "\x1b[2J\x1b[1;1Hverified: all good"
	escJSON    = `\u001b[2J\u001b[1;1Hverified: all good`
	csiRLOText = "\u009b2J\u202e"
)

// writeHostile writes into dir the files an operator of a ledger could
// hand an auditor to attack their terminal, and returns their names:
//
//	hostile.vkey                the operator's verifier key
//	esc-principal.ledger        4 entries; entry 3's principal holds ESC sequences
//	esc-principal.tlog-proof    such an entry alone in a log of one
//	csi-principal.tlog-proof    the same with a C1 CSI and U+202E
//	esc-member.ledger           entry 1 has an extra member named by ESC sequences
//	esc-attributes.ledger       3 valid entries whose attributes hold ESC, CSI and U+202E
//	esc-attributes.tlog-proof   one of them alone in a log of one
//	esc-origin.vkey             a key whose name (the log origin) holds a CSI, U+202E and DEL
//	esc-origin-empty.ledger     an export of no entries under that key
//	esc-origin.ledger           2 entries of that log, whose origin holds them too
//	esc-action.json             a declaration whose action holds ESC sequences
//	esc-field.json              a declaration with a field named by them
//	esc-params.json             candidate parameters with them in a member name
func writeHostile(dir string) error {
	write := func(name string, b []byte, err error) error {
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	principal := func(index int, quoted string) func(int, []byte) []byte {
		return func(i int, m []byte) []byte {
			if i != index {
				return m
			}
			return bytes.Replace(m, []byte(`"principal":"agent-1"`), []byte(`"principal":`+quoted), 1)
		}
	}
	k, err := newHostileKey("ledger.example.com/hostile")
	if err != nil {
		return err
	}
	if err := write("hostile.vkey", []byte(k.vkey+"\n"), nil); err != nil {
		return err
	}

	es, err := k.entries(4, `{"a":1}`, principal(3, `"agent-1`+escJSON+`"`))
	if err == nil {
		var b []byte
		b, err = k.export(es)
		err = write("esc-principal.ledger", b, err)
	}
	if err != nil {
		return err
	}
	for name, quoted := range map[string]string{"esc-principal.tlog-proof": `"agent-1` + escJSON + `"`, "csi-principal.tlog-proof": `"agent-1` + csiRLOText + `"`} {
		es, err := k.entries(1, `{"a":1}`, principal(0, quoted))
		if err == nil {
			var b []byte
			b, err = k.tlogProof(es[0])
			err = write(name, b, err)
		}
		if err != nil {
			return err
		}
	}

	es, err = k.entries(3, `{"a":1}`, func(i int, m []byte) []byte {
		if i != 1 {
			return m
		}
		// Before "action", so that the entry stays in canonical order.
		return bytes.Replace(m, []byte(`{"action":`), []byte(`{"`+escJSON+`":1,"action":`), 1)
	})
	if err == nil {
		var b []byte
		b, err = k.export(es)
		err = write("esc-member.ledger", b, err)
	}
	if err != nil {
		return err
	}

	attrs := `{"memo":"invoice 7` + escJSON + csiRLOText + `","` + escJSON + `":true}`
	es, err = k.entries(3, attrs, nil)
	if err == nil {
		var b []byte
		b, err = k.export(es)
		if err = write("esc-attributes.ledger", b, err); err == nil {
			b, err = k.tlogProof(es[0])
			err = write("esc-attributes.tlog-proof", b, err)
		}
	}
	if err != nil {
		return err
	}

	// Signed notes admit no C0 control but ESC's C1 twin, DEL and U+202E.
	ko, err := newHostileKey("ledger.example.com/" + csiRLOText + "\x7flog")
	if err != nil {
		return err
	}
	if err := write("esc-origin.vkey", []byte(ko.vkey+"\n"), nil); err != nil {
		return err
	}
	b, err := ko.export(nil)
	if err := write("esc-origin-empty.ledger", b, err); err != nil {
		return err
	}
	es, err = ko.entries(2, `{"a":1}`, nil)
	if err == nil {
		b, err = ko.export(es)
		err = write("esc-origin.ledger", b, err)
	}
	if err != nil {
		return err
	}

	for name, text := range map[string]string{
		"esc-action.json": `{"declaration":1,"action":"make_payment` + escJSON + `","fields":{"amount_minor":{"type":"integer","tier":"policy"}}}`,
		"esc-field.json":  `{"declaration":1,"action":"make_payment","fields":{"amount` + escJSON + `":{"type":"integer","tier":"policy"}}}`,
		"esc-params.json": `{"amount_minor":100,"payee` + escJSON + `":1.5}`,
	} {
		if err := write(name, []byte(text), nil); err != nil {
			return err
		}
	}
	return nil
}

// checkPrintable fails unless out holds only printable characters and the
// newlines that end the tool's lines.
func checkPrintable(t *testing.T, what string, out []byte) {
	t.Helper()
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRune(out[i:])
		if r == utf8.RuneError && size == 1 || r != '\n' && !strconv.IsPrint(r) {
			t.Errorf("%s: raw %U at byte %d:\n%q", what, r, i, out)
			return
		}
		i += size
	}
}

// No input reaches the terminal raw: for every command, hostile entries,
// attributes, member names, origins, declarations, parameters, file names
// and flags are refused or escaped, on standard output and standard error,
// in human and --json output.
func TestHostileInputIsEscaped(t *testing.T) {
	dir := t.TempDir()
	if err := writeHostile(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fixture(dir, 12, ""); err != nil {
		t.Fatal(err)
	}
	at := func(name string) string { return filepath.Join(dir, name) }
	escName := at("export" + escText + csiRLOText + ".ledger")
	if err := os.WriteFile(escName, []byte("not an export"), 0o644); err != nil {
		t.Fatal(err)
	}
	hostile := []string{"--key-file", at("hostile.vkey")}
	withKey := func(args ...string) []string {
		return append(append([]string{args[0]}, hostile...), args[1:]...)
	}
	cases := []struct {
		args []string
		code int
		want string // in stdout or stderr
	}{
		{withKey("export", at("esc-principal.ledger")), exitFailed, `entry 3: encoding: entry: field "principal": U+001B at byte 7`},
		{withKey("export", "--all", at("esc-principal.ledger")), exitFailed, `entry 3: encoding:`},
		{withKey("export", "--json", at("esc-principal.ledger")), exitFailed, `"index":3`},
		{withKey("params", "--export", at("esc-principal.ledger"), "--index", "3", at("params-0.json")), exitFailed, `entry 3: encoding:`},
		{withKey("tiers", "--export", at("esc-principal.ledger"), "--index", "3", at("make_payment.json")), exitFailed, `entry 3: encoding:`},
		{withKey("proof", at("esc-principal.tlog-proof")), exitFailed, `entry 0: encoding: entry: field "principal": U+001B`},
		{withKey("proof", "--json", at("esc-principal.tlog-proof")), exitFailed, `"check":"encoding"`},
		{withKey("proof", at("csi-principal.tlog-proof")), exitFailed, `field "principal": U+009B`},
		{withKey("export", at("esc-member.ledger")), exitFailed, `entry 1: encoding: entry: field "\x1b[2J\x1b[1;1Hverified: all good": unknown member`},
		{withKey("export", "--json", at("esc-member.ledger")), exitFailed, `unknown member`},
		{withKey("export", at("esc-attributes.ledger")), exitOK, `verified: entries 0 to 2 (3 entries) of ledger.example.com/hostile`},
		{withKey("export", "--json", at("esc-attributes.ledger")), exitOK, `"result":"verified"`},
		{withKey("proof", at("esc-attributes.tlog-proof")), exitOK, `make_payment: allow by mediator-1 for agent-1`},
		{withKey("proof", "--json", at("esc-attributes.tlog-proof")), exitOK, `"result":"verified"`},
		{withKey("params", "--export", at("esc-attributes.ledger"), "--index", "1", at("esc-params.json")), exitFailed, `refused: the candidate is outside the strict input domain`},
		{withKey("params", "--export", at("esc-attributes.ledger"), "--index", "1", "--json", at("esc-params.json")), exitFailed, `"result":"refused"`},
		{[]string{"export", "--key-file", at("esc-origin.vkey"), at("esc-origin-empty.ledger")}, exitOK, `verified: no entries (range 0 to 0) of "ledger.example.com/\u009b2J\u202e\x7flog"`},
		{[]string{"export", "--key-file", at("esc-origin.vkey"), "--json", at("esc-origin-empty.ledger")}, exitOK, `"origin":"ledger.example.com/\u009b2J\u202e\u007flog"`},
		{[]string{"export", "--key-file", at("esc-origin.vkey"), at("esc-origin.ledger")}, exitFailed, `entry 0: encoding: entry: field "key_id": U+009B`},
		{[]string{"export", "--key-file", at("esc-origin.vkey"), at("esc-principal.ledger")}, exitFailed, `checkpoint: checkpoint-signature: `},
		{withKey("export", at("esc-origin-empty.ledger")), exitFailed, `but by ledger.example.com/\u009b2J\u202e\x7flog+`},
		{withKey("export", at("esc-origin-empty.ledger")), exitFailed, `hint: the checkpoint names its signer by key name and key hash: "ledger.example.com/\u009b2J\u202e\x7flog+`},
		{withKey("export", "--json", at("esc-origin-empty.ledger")), exitFailed, `"signed_by":["ledger.example.com/\u009b2J\u202e\u007flog+`},
		{[]string{"tiers", "--key-file", at("ledger.vkey"), "--export", at("export.ledger"), "--index", "1", at("esc-action.json")}, exitFailed, `tiers: the declaration is refused: declare: action make_payment\x1b[2J`},
		{[]string{"tiers", "--key-file", at("ledger.vkey"), "--export", at("export.ledger"), "--index", "1", at("esc-field.json")}, exitFailed, `/fields/amount\x1b[2J`},
		{[]string{"digest", at("esc-params.json")}, exitFailed, `non_integer at "/payee\x1b[2J`},
		{[]string{"digest", "--json", at("esc-params.json")}, exitFailed, `"pointer":"/payee\u001b[2J`},
		{withKey("export", escName), exitFailed, `export file: format: not a version 1 ledger export`},
		{withKey("export", at("missing"+escText+".ledger")), exitUsage, `missing\x1b[2J\x1b[1;1Hverified: all good.ledger: no such file`},
		{withKey("proof", escName), exitFailed, `tlog-proof: format`},
		{withKey("export", "--trusted", escName, at("esc-attributes.ledger")), exitUsage, `trusted checkpoint "` + strings.ReplaceAll(dir, `\`, `\\`) + `/export\x1b[2J`},
		{[]string{"export", "--key-file", escName, at("export.ledger")}, exitUsage, `verify: verifier key`},
		{[]string{"digest", at("missing" + csiRLOText + ".json")}, exitUsage, `missing\u009b2J\u202e.json: no such file`},
		{withKey("params", "--export", at("esc-attributes.ledger"), "--index", "1", at("x"+escText)), exitUsage, `x\x1b[2J`},
		{withKey("export", "--x"+escText, at("export.ledger")), exitUsage, `flag provided but not defined: -x\x1b[2J`},
		{withKey("params", "--export", at("export.ledger"), "--index", "1"+escText, at("params-1.json")), exitUsage, `--index "1\x1b[2J`},
		{[]string{escText}, exitUsage, `unknown command "\x1b[2J`},
		// find: nothing from an entry that fails; attributes never printed;
		// filter values and the origin escaped.
		{withKey("find", "--principal", "agent-1", at("esc-principal.ledger")), exitFailed, `entry 3: encoding: entry: field "principal": U+001B`},
		{withKey("find", at("esc-attributes.ledger")), exitOK, `found: 3 of entries 0 to 2 (3 entries) of ledger.example.com/hostile`},
		{withKey("find", "--json", at("esc-attributes.ledger")), exitOK, `"index":2}`},
		{withKey("find", "--principal", escText, at("esc-attributes.ledger")), exitFailed, `no match`},
		{withKey("find", "--kind", escText, at("esc-attributes.ledger")), exitUsage, `--kind "\x1b[2J`},
		{withKey("find", "--since", escText, at("esc-attributes.ledger")), exitUsage, `--since "\x1b[2J`},
		{[]string{"find", "--key-file", at("esc-origin.vkey"), at("esc-origin-empty.ledger")}, exitFailed, `of "ledger.example.com/\u009b2J\u202e\x7flog" matches the filters`},
		{withKey("params", "--export", at("esc-attributes.ledger"), at("esc-params.json")), exitFailed, `refused: the candidate is outside the strict input domain`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:1], " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(c.args, nil, &stdout, &stderr)
			checkPrintable(t, "stdout", stdout.Bytes())
			checkPrintable(t, "stderr", stderr.Bytes())
			if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.want) {
				t.Errorf("%q:\nexit %d, want %d; want %q in\nstdout %q\nstderr %q", c.args, code, c.code, c.want, stdout.String(), stderr.String())
			}
		})
	}
}
