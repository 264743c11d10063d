package verify

import "github.com/decisionledger/ledger/commit"

// Last returns the entry hash of the last entry added to the range (the
// prev of the entry after it, which a monitor keeps to check the chain
// across runs), or, before any, the prev it was started with; nil if
// unknown (an entry that failed to parse). Meaningful only once Finish
// returned nil.
func (r *Range) Last() *commit.Digest {
	if r.prev == nil {
		return nil
	}
	d := *r.prev
	return &d
}
