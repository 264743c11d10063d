package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/internal/signednote"
	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// Key rotation (docs/operations.md has the runbook).
//
// A log's key can be replaced by a new key with the same name (the log
// origin, which every entry and checkpoint carries) and another key hash.
// The rotation point is a checkpoint of the whole tree signed by both
// keys: the old key vouches, once, for the new one. Rotate signs it, with
// the ledger stopped; entries appended after it carry the new key's id,
// and the checkpoints after it are signed by the new key alone. The old
// key must never sign again: destroy it.
//
// Open (with Options.PreviousKeys, the old keys' verifier keys) checks the
// chain of keys back from the configured one: for each key, the first
// entry carrying its id is found (entries of one key are contiguous); the
// checkpoint stored for exactly that tree size must be signed by that key
// and by an earlier one, its root must be the stored tree's at that size,
// and the entry before it must carry the earlier key's id; and so on back
// to the log's first key, whose entries start at index 0. With previous
// keys listed, that first key must be one of them: a history that the new
// key alone vouches for, from the start or from the rotation point, is
// refused, since whoever holds only the new key could have written it.

// ErrRotation classifies refusals about a log's keys: a store signed by a
// key that is not configured, a rotation not made or not provable, a new
// key that cannot follow the old one. The error says which key and what
// to do; test with errors.Is.
var ErrRotation = errors.New("ledger: key rotation")

// UnknownKeyError: the store holds a checkpoint or an entry signed by a key
// that is neither the configured key nor one of Options.PreviousKeys,
// typically because the key was rotated and the old verifier key is not
// listed. It is errors.Is ErrRotation.
type UnknownKeyError struct {
	// What names the signed object: "the latest checkpoint (tree size
	// 1000)", "entry 999".
	What string
	// Signers are the ids ("<name>+<hash>") of the keys that signed it.
	Signers []string
	// Configured is the configured key's id; Previous the listed previous
	// keys' ids.
	Configured string
	Previous   []string
}

func (e *UnknownKeyError) Error() string {
	known := "the configured key " + e.Configured
	if len(e.Previous) > 0 {
		known += " or a previous key (" + strings.Join(e.Previous, ", ") + ")"
	}
	return fmt.Sprintf("%v: %s is signed by %s, not by %s: if the log's key was rotated, list the old verifier key as a previous key (docs/operations.md); otherwise this is not the key of this store",
		ErrRotation, e.What, strings.Join(e.Signers, ", "), known)
}

func (e *UnknownKeyError) Unwrap() error { return ErrRotation }

// keyring is the configured key and the previous keys, for opening
// checkpoints.
type keyring struct {
	current   *Key
	previous  []note.Verifier
	ids       map[string]bool // every key's "<name>+<hash>"
	prevIDs   []string
	verifiers []note.Verifier // current first
}

func newKeyring(current *Key, previous []string) (*keyring, error) {
	cv, err := note.NewVerifier(current.VerifierKey())
	if err != nil {
		return nil, err
	}
	k := &keyring{current: current, ids: map[string]bool{current.ID(): true}, verifiers: []note.Verifier{cv}}
	for _, vkey := range previous {
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("%w: previous key %d: %w", ErrRotation, len(k.previous)+1, err)
		}
		id := keyID(v)
		if v.Name() != current.Name() {
			return nil, fmt.Errorf("%w: previous key %s is named %q, the key %q: every key of a log has its name, the log origin", ErrRotation, id, v.Name(), current.Name())
		}
		if k.ids[id] {
			if id == current.ID() {
				return nil, fmt.Errorf("%w: previous key %s is the configured key", ErrRotation, id)
			}
			continue
		}
		k.ids[id] = true
		k.prevIDs = append(k.prevIDs, id)
		k.previous = append(k.previous, v)
		k.verifiers = append(k.verifiers, v)
	}
	return k, nil
}

func keyID(v interface {
	Name() string
	KeyHash() uint32
}) string {
	return fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
}

// open opens a signed checkpoint with every key of the ring, strictly
// (internal/signednote), and returns it with the ids of the ring's keys
// that signed it, in the ring's order, and those of the other signers.
// what names the checkpoint in errors.
func (k *keyring) open(signed []byte, what string) (cp *log.Checkpoint, signers, others []string, err error) {
	n, err := signednote.Open(signed, k.verifiers[0], k.verifiers[1:]...)
	if unverified, ok := errors.AsType[*note.UnverifiedNoteError](err); ok {
		e := &UnknownKeyError{What: what, Configured: k.current.ID(), Previous: k.prevIDs}
		for _, s := range unverified.Note.UnverifiedSigs {
			e.Signers = append(e.Signers, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return nil, nil, nil, e
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	cp = &log.Checkpoint{}
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, what, err)
	}
	if cp.Origin != k.current.Name() {
		return nil, nil, nil, fmt.Errorf("%w: %s is for origin %q, the key's is %q", ErrCorrupt, what, cp.Origin, k.current.Name())
	}
	for _, s := range n.UnverifiedSigs {
		others = append(others, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
	}
	for _, v := range k.verifiers {
		for _, s := range n.Sigs {
			if s.Name == v.Name() && s.Hash == v.KeyHash() {
				signers = append(signers, keyID(v))
				break
			}
		}
	}
	return cp, signers, others, nil
}

// Rotation is one key rotation of a log: the checkpoint for tree size
// Size is signed by both From and To (their ids); entries from index Size
// on carry To's id.
type Rotation struct {
	Size     uint64
	From, To string
}

// checkKeys walks the chain of keys back from the configured key, as the
// doc at the top of this file says, and returns the rotations found,
// oldest first. latestSigners are the ring's keys that signed the latest
// checkpoint, latestOthers its other signers; size is the tree size.
func (l *Ledger) checkKeys(ctx context.Context, ring *keyring, latestSigners, latestOthers []string, size uint64) ([]Rotation, error) {
	cur := ring.current.ID()
	if l.cp != nil && !slices.Contains(latestSigners, cur) {
		// Signed by previous keys only: the new key was configured, but
		// no rotation checkpoint was signed.
		return nil, fmt.Errorf("%w: the latest checkpoint (tree size %d) is signed by the previous key %s, not by the configured key %s: "+
			"the rotation was not made: sign a rotation checkpoint with both keys (ledgerd key rotate, docs/operations.md), or configure the previous key again",
			ErrRotation, l.cpSize, strings.Join(latestSigners, ", "), cur)
	}
	keyAt := func(i uint64) (string, error) {
		b, err := l.store.Entry(ctx, i)
		if err != nil {
			return "", fmt.Errorf("ledger: reading entry %d: %w", i, err)
		}
		e, err := entry.Parse(b)
		if err != nil {
			return "", fmt.Errorf("%w: entry %d: %w", ErrCorrupt, i, err)
		}
		return e.KeyID, nil
	}
	if size > 0 {
		// Just rotated, with the old key still configured: the latest
		// checkpoint is signed by it and by another key of the log's name,
		// and the last entry is the old key's.
		for _, other := range latestOthers {
			if name, _, _ := strings.Cut(other, "+"); name != ring.current.Name() {
				continue
			}
			if id, err := keyAt(size - 1); err != nil {
				return nil, err
			} else if id == cur {
				return nil, fmt.Errorf("%w: the configured key %s was rotated out: the latest checkpoint (tree size %d) is a rotation checkpoint signed by it and by %s, "+
					"which signs from there on: configure the new key and list %s as a previous key (ledgerd key rotate run again completes the config); the old key must never sign again",
					ErrRotation, cur, l.cpSize, other, cur)
			}
		}
	}
	var rotations []Rotation
	visited := map[string]bool{cur: true}
	tiles := newTileReader(ctx, l.store)
	hi := size
	for {
		// The first entry below hi carrying cur's id: entries [start, hi)
		// are cur's.
		lo, up := uint64(0), hi
		for lo < up {
			mid := lo + (up-lo)/2
			id, err := keyAt(mid)
			if err != nil {
				return nil, err
			}
			if id == cur {
				up = mid
			} else {
				lo = mid + 1
			}
		}
		startAt := lo
		if startAt < hi {
			// The last entry of the span must be cur's too: the last entry
			// of the log, or the entry before the rotation checkpoint that
			// handed over from cur.
			if id, err := keyAt(hi - 1); err != nil {
				return nil, err
			} else if id != cur {
				return nil, l.entryKeyError(ring, hi-1, id, cur, size)
			}
		}
		// The checkpoint at startAt must be signed by cur and by a key not
		// yet met on the way back: the key cur replaced.
		signed, err := l.store.Checkpoint(ctx, startAt)
		var from string
		if err == nil {
			what := fmt.Sprintf("the checkpoint for tree size %d", startAt)
			// A checkpoint not signed by cur is no rotation to cur.
			cp, signers, _, err := ring.open(signed, what)
			if err != nil {
				return nil, err
			}
			if slices.Contains(signers, cur) {
				for _, s := range signers {
					if !visited[s] {
						from = s
						break
					}
				}
				if from != "" {
					root, err := tiles.rootAt(startAt)
					if err != nil {
						return nil, fmt.Errorf("ledger: root at rotation size %d: %w", startAt, err)
					}
					if !bytes.Equal(root, cp.Hash) {
						return nil, fmt.Errorf("%w: stored tiles give root %x at size %d, the rotation checkpoint signed by %s and %s says %x", ErrCorrupt, root, startAt, from, cur, cp.Hash)
					}
				}
			}
		} else if !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("ledger: reading the checkpoint for tree size %d: %w", startAt, err)
		}
		if from == "" {
			if startAt > 0 {
				id, err := keyAt(startAt - 1)
				if err != nil {
					return nil, err
				}
				if !ring.ids[id] {
					return nil, &UnknownKeyError{What: fmt.Sprintf("entry %d", startAt-1), Signers: []string{id}, Configured: ring.current.ID(), Previous: ring.prevIDs}
				}
				return nil, fmt.Errorf("%w: %w: entries from %d on carry key %s, those before key %s, but no checkpoint for tree size %d is signed by both: "+
					"a rotation needs the old key's signature on the tree it hands over (ledgerd key rotate); a history only the new key vouches for is refused",
					ErrCorrupt, ErrRotation, startAt, cur, id, startAt)
			}
			// cur signs from the log's start: it is the log's first key.
			if cur == ring.current.ID() && len(ring.previous) > 0 {
				return nil, fmt.Errorf("%w: previous keys are listed (%s), but the configured key %s signs the log from its first entry and no checkpoint rotates to it: "+
					"a history only the new key vouches for is refused; if the previous keys belong to another log, remove them from the configuration",
					ErrRotation, strings.Join(ring.prevIDs, ", "), cur)
			}
			slices.Reverse(rotations)
			return rotations, nil
		}
		// Entry startAt-1 must be from's: checked as the last entry of
		// from's span, next round.
		rotations = append(rotations, Rotation{Size: startAt, From: from, To: cur})
		visited[from] = true
		cur, hi = from, startAt
	}
}

// entryKeyError refuses entry i, carrying key id where key want signs:
// the log's last entry (size-1) or the one before a rotation checkpoint.
func (l *Ledger) entryKeyError(ring *keyring, i uint64, id, want string, size uint64) error {
	if !ring.ids[id] {
		return &UnknownKeyError{What: fmt.Sprintf("entry %d", i), Signers: []string{id}, Configured: ring.current.ID(), Previous: ring.prevIDs}
	}
	if i == size-1 {
		return fmt.Errorf("%w: %w: entry %d carries key %s after entries of key %s, which replaced it: an old key must never sign again",
			ErrCorrupt, ErrRotation, i, id, want)
	}
	return fmt.Errorf("%w: %w: the rotation checkpoint for tree size %d hands over from key %s, but entry %d carries key %s",
		ErrCorrupt, ErrRotation, i+1, want, i, id)
}

// Rotations returns the log's key rotations, oldest first, as Open found
// them.
func (l *Ledger) Rotations() []Rotation { return slices.Clone(l.rotations) }

// Rotate makes newKey the log's key: with the ledger stopped, it opens the
// store with old (the key the log is signed with now, and the log's
// earlier keys in opts.PreviousKeys), checked as Open checks it, and
// stores a checkpoint of the whole tree signed by old and newKey: the
// rotation checkpoint, which it returns. If the latest checkpoint covers
// the whole tree, the rotation checkpoint is that one with newKey's
// signature line added (Store.AddCheckpoint accepts it for the same
// size); otherwise it is signed for the tree's size. Afterwards, open the
// store with newKey, listing old's verifier key in Options.PreviousKeys.
//
// newKey must have old's name (the log origin) and another key hash.
// Rotating to a key the latest checkpoint is already signed by signs
// nothing: it checks that the store opens with newKey (old listed as a
// previous key) and returns the latest checkpoint, so that a rotation
// interrupted after the rotation checkpoint was stored can be run again.
func Rotate(ctx context.Context, store Store, old, newKey *Key, opts Options) ([]byte, error) {
	if newKey.Name() != old.Name() {
		return nil, fmt.Errorf("%w: the new key is named %q, the log's key %q: a log's keys must have its name, the origin every entry and checkpoint carries; generate the new key with the same name",
			ErrRotation, newKey.Name(), old.Name())
	}
	if newKey.ID() == old.ID() {
		return nil, fmt.Errorf("%w: the new key %s is the log's key: generate a new key (ledgerd keygen)", ErrRotation, old.ID())
	}
	if slices.ContainsFunc(opts.PreviousKeys, func(v string) bool { return strings.HasPrefix(v, newKey.ID()+"+") }) {
		return nil, fmt.Errorf("%w: the new key %s is a previous key of the log: an old key must never sign again", ErrRotation, newKey.ID())
	}
	opts = opts.withDefaults()
	newV, err := note.NewVerifier(newKey.VerifierKey())
	if err != nil {
		return nil, err
	}
	st, err := store.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("ledger: reading store state: %w", err)
	}
	if st.Checkpoint != nil {
		if _, err := signednote.Open(st.Checkpoint, newV); err == nil {
			// Made already (a rotation interrupted before its caller
			// switched keys): check the store as it opens with newKey.
			after := opts
			after.PreviousKeys = append(slices.Clone(opts.PreviousKeys), old.VerifierKey())
			if _, err := check(ctx, store, newKey, after); err != nil {
				return nil, err
			}
			return bytes.Clone(st.Checkpoint), nil
		}
	}
	l, err := check(ctx, store, old, opts)
	if err != nil {
		return nil, err
	}
	size := l.edge.size()
	if l.cp != nil && l.cpSize == size {
		// The latest checkpoint, with newKey's signature line added.
		text, _, _ := bytes.Cut(l.cp, []byte("\n\n"))
		sig, err := note.Sign(&note.Note{Text: string(text) + "\n"}, newKey.Signer())
		if err != nil {
			return nil, fmt.Errorf("ledger: signing the rotation checkpoint: %w", err)
		}
		_, line, _ := bytes.Cut(sig, []byte("\n\n"))
		signed := append(bytes.Clone(l.cp), line...)
		if err := store.AddCheckpoint(ctx, size, signed); err != nil {
			return nil, fmt.Errorf("ledger: storing the rotation checkpoint for tree size %d: %w", size, err)
		}
		return signed, nil
	}
	root := l.edge.root()
	if err := l.verifyConsistency(ctx, l.cpSize, l.cpRoot, size, root); err != nil {
		return nil, fmt.Errorf("%w: tree of size %d is not consistent with the checkpoint of size %d: %w", ErrCorrupt, size, l.cpSize, err)
	}
	text := log.Checkpoint{Origin: old.Name(), Size: size, Hash: root}.Marshal()
	signed, err := note.Sign(&note.Note{Text: string(text)}, old.Signer(), newKey.Signer())
	if err != nil {
		return nil, fmt.Errorf("ledger: signing the rotation checkpoint: %w", err)
	}
	if err := store.AddCheckpoint(ctx, size, signed); err != nil {
		return nil, fmt.Errorf("ledger: storing the rotation checkpoint for tree size %d: %w", size, err)
	}
	return signed, nil
}
