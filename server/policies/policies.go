// Package policies is the policy set that ledgerd decides with (POST
// /v1/decide, docs/api.md "Decide") and its archive: loaded from
// policy_dir at start and on SIGHUP, archived in the store directory,
// published in the log, and only then put in force, so that every
// decision entry's policy set was published by an earlier entry and is
// in the archive (GET /v1/policies serves it).
package policies

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/decisionledger/ledger/catalog"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/commit/declare"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/atomicfile"
	"github.com/decisionledger/ledger/ledger"
	"github.com/decisionledger/ledger/policy"
	"github.com/decisionledger/ledger/server/metrics"
)

// The policy archive, in the store directory:
//
//	store_dir/policies/<hex>.bundle   every set ledgerd used, by digest:
//	                                  its bundle (policy.Bundle), whose
//	                                  SHA-256 is the digest
//	store_dir/policies/published.json the latest publication ledgerd made:
//	                                  {"policy_set":"sha256:…","index":N},
//	                                  without index while it is appended
//
// Every file is written to a temporary file, synced, renamed and its
// directory synced (writeFile), mode 0600 in a 0700 directory. A set is
// archived before its publication entry is appended, and put in force
// only once that entry is durable: every decision entry's policy set was
// published by an earlier entry and is in the archive.
const (
	DirName       = "policies"       // the archive's directory in store_dir
	PublishedName = "published.json" // the latest publication's record
	bundleSuffix  = ".bundle"
)

// Archive is the policy archive of a store directory and the set in
// force, which it archived and published. Reloads and publications are
// serialized by mu; deciding reads cur alone, once per decision. A nil
// *Archive decides nothing and archives nothing.
type Archive struct {
	dir     string // policy_dir; "" when ledgerd does not decide
	archive string // store_dir/policies
	decls   []*declare.Declaration
	l       *ledger.Ledger
	log     *slog.Logger
	m       *metrics.Series

	mu  sync.Mutex
	cur atomic.Pointer[policy.Set]
}

// New makes the policies of l: the sets loaded from dir
// (config policy_dir; "" when ledgerd does not decide) against the
// catalog's declarations, archived in storeDir's policies directory
// (config store_dir), published in l; reloads and the set in force are
// counted in m. No set is in force until Start.
func New(dir, storeDir string, cat catalog.Catalog, l *ledger.Ledger, log *slog.Logger, m *metrics.Series) *Archive {
	return &Archive{
		dir: dir, archive: filepath.Join(storeDir, DirName),
		decls: cat.Declarations(), l: l, log: log, m: m,
	}
}

// Current is the set in force, or nil when ledgerd does not decide.
func (p *Archive) Current() *policy.Set {
	if p == nil {
		return nil
	}
	return p.cur.Load()
}

// CurrentDigest is the digest of the set in force, "" if none.
func (p *Archive) CurrentDigest() string {
	if set := p.Current(); set != nil {
		return set.Digest().String()
	}
	return ""
}

// Start puts set, loaded at start, in force: it is archived, and
// published unless the latest publication ledgerd recorded is of the same
// set and the log's entry at its index really is that publication. In
// doubt it publishes again; a repeated publication is harmless.
func (p *Archive) Start(ctx context.Context, set *policy.Set) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.Store(set); err != nil {
		return err
	}
	if index, ok := p.published(ctx, set.Digest()); ok {
		p.swap(set)
		p.log.InfoContext(ctx, "policy set in force, published before", "policy_set", set.Digest().String(), "publication", index)
		return nil
	}
	index, err := p.publish(ctx, set)
	if err != nil {
		return err
	}
	p.log.InfoContext(ctx, "policy set published and in force", "policy_set", set.Digest().String(), "publication", index)
	return nil
}

// Reload loads policy_dir again against the catalog in force (SIGHUP). A
// set that does not load is refused, logged with its file:line:col and
// counted; the set in force stays. A new set is archived, published and
// then put in force.
func (p *Archive) Reload(ctx context.Context) error {
	if p.dir == "" {
		p.log.WarnContext(ctx, "policy reload: no policy_dir in the config; nothing to reload")
		return errors.New("no policy_dir")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.CurrentDigest()
	set, err := policy.Load(p.dir, p.decls)
	if err != nil {
		p.m.PolicyReload(false)
		p.log.ErrorContext(ctx, "policy reload refused; the policy set in force stays", "error", err, "policy_set", old)
		return err
	}
	if set.Digest().String() == old {
		p.m.PolicyReload(true)
		p.log.InfoContext(ctx, "policy reload: the set is unchanged", "policy_set", old)
		return nil
	}
	index, err := uint64(0), p.Store(set)
	if err == nil {
		index, err = p.publish(ctx, set)
	}
	if err != nil {
		p.m.PolicyReload(false)
		p.log.ErrorContext(ctx, "policy reload failed; the policy set in force stays", "error", err, "policy_set", old)
		return err
	}
	p.m.PolicyReload(true)
	p.log.InfoContext(ctx, "policy set reloaded, published and in force", "policy_set", set.Digest().String(), "previous", old, "publication", index)
	return nil
}

// swap puts set in force.
func (p *Archive) swap(set *policy.Set) {
	p.cur.Store(set)
	p.m.SetPolicySet(set.Digest().String())
}

// Store archives set's bundle, unless the archive holds it already (a
// cluster's follower archives the set it would put in force, so that its
// exports carry the bundle).
func (p *Archive) Store(set *policy.Set) error {
	if err := p.makeArchive(); err != nil {
		return err
	}
	path := filepath.Join(p.archive, BundleFileName(set.Digest()))
	if b, err := os.ReadFile(path); err == nil && policy.DigestOfBundle(b) == set.Digest() {
		return nil
	}
	if err := atomicfile.Write(path, set.Bundle(), atomicfile.Options{}); err != nil {
		return fmt.Errorf("archiving the policy set: %w", err)
	}
	return nil
}

// makeArchive creates the archive directory, durably, if it is missing.
func (p *Archive) makeArchive() error {
	err := os.Mkdir(p.archive, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(p.archive))
	}
	if err != nil {
		return fmt.Errorf("creating the policy archive: %w", err)
	}
	return nil
}

// BundleFileName is the name of the bundle of the set of digest d in the
// archive's directory.
func BundleFileName(d commit.Digest) string { return hex.EncodeToString(d[:]) + bundleSuffix }

// publication is published.json.
type publication struct {
	PolicySet string  `json:"policy_set"`
	Index     *uint64 `json:"index,omitempty"` // nil while being appended
}

// published returns the index of the publication of digest, if the
// archive records it as the latest publication and the log's entry there
// is that publication.
func (p *Archive) published(ctx context.Context, digest commit.Digest) (uint64, bool) {
	b, err := os.ReadFile(filepath.Join(p.archive, PublishedName))
	if err != nil {
		return 0, false
	}
	var pub publication
	if json.Unmarshal(b, &pub) != nil || pub.Index == nil || pub.PolicySet != digest.String() {
		return 0, false
	}
	raw, err := p.l.Entry(ctx, *pub.Index)
	if err != nil {
		return 0, false
	}
	e, err := entry.Parse(raw)
	if err != nil || e.Kind != entry.KindPolicySet || e.PolicySet != digest {
		return 0, false
	}
	return *pub.Index, true
}

// publish appends the publication of set, archived before, and puts it
// in force once the publication is durable. published.json says, before
// the append, that a publication is under way (so that a crash leaves
// doubt, and the next start publishes again), and after it, its index.
func (p *Archive) publish(ctx context.Context, set *policy.Set) (uint64, error) {
	digest := set.Digest()
	if err := p.writePublished(publication{PolicySet: digest.String()}); err != nil {
		return 0, err
	}
	var receipt ledger.Receipt
	var err error
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		receipt, err = p.l.Append(ctx, ledger.Record{Kind: entry.KindPolicySet, PolicySet: digest})
		if !errors.Is(err, ledger.ErrQueueFull) {
			break
		}
		// Appends fill the queue: the publication waits its turn.
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err != nil {
		return 0, fmt.Errorf("publishing the policy set: %w", err)
	}
	if err := p.writePublished(publication{PolicySet: digest.String(), Index: &receipt.Index}); err != nil {
		return 0, err
	}
	p.swap(set)
	return receipt.Index, nil
}

func (p *Archive) writePublished(pub publication) error {
	b, _ := json.Marshal(pub)
	if err := atomicfile.Write(filepath.Join(p.archive, PublishedName), append(b, '\n'), atomicfile.Options{}); err != nil {
		return fmt.Errorf("recording the policy publication: %w", err)
	}
	return nil
}

// List lists the digests of the archived sets, sorted.
func (p *Archive) List() ([]string, error) {
	if p == nil {
		return []string{}, nil
	}
	des, err := os.ReadDir(p.archive)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	list := []string{}
	for _, de := range des {
		h, ok := strings.CutSuffix(de.Name(), bundleSuffix)
		if !ok {
			continue
		}
		if d, err := commit.ParseDigest("sha256:" + h); err == nil {
			list = append(list, d.String())
		}
	}
	slices.Sort(list)
	return list, nil
}

// Bundle reads the archived bundle of digest, checking that it hashes to
// digest; fs.ErrNotExist if the archive has none.
func (p *Archive) Bundle(digest commit.Digest) ([]byte, error) {
	if p == nil {
		return nil, fs.ErrNotExist
	}
	b, err := os.ReadFile(filepath.Join(p.archive, BundleFileName(digest)))
	if err != nil {
		return nil, err
	}
	if policy.DigestOfBundle(b) != digest {
		return nil, fmt.Errorf("the archived bundle of %s does not hash to its digest", digest)
	}
	return b, nil
}
