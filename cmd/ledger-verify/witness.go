package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/decisionledger/ledger/verify"
)

// witnessFlag collects repeated --witness keys.
type witnessFlag []string

func (w *witnessFlag) String() string { return strings.Join(*w, ",") }

func (w *witnessFlag) Set(v string) error {
	*w = append(*w, strings.TrimSpace(v))
	return nil
}

// witnessPolicy returns key with the policy --witness and
// --witnesses-needed give, or key unchanged if they give none.
func (k *keyFlags) witnessPolicy(key *verify.Key) (*verify.Key, error) {
	if len(k.witnesses) == 0 {
		if k.witnessesNeeded > 0 {
			return nil, fmt.Errorf("--witnesses-needed %d, but no --witness key given: list the witnesses you trust", k.witnessesNeeded)
		}
		return key, nil
	}
	var ws []*verify.WitnessKey
	for _, v := range k.witnesses {
		w, err := verify.ParseWitnessKey(v)
		if err != nil {
			return nil, fmt.Errorf("--witness: %w", err)
		}
		ws = append(ws, w)
	}
	needed := k.witnessesNeeded
	if needed < 0 {
		needed = len(ws)
	}
	if needed == 0 {
		return nil, errors.New("--witnesses-needed 0 with --witness keys checks nothing: give at least 1, or no --witness")
	}
	p, err := verify.NewWitnessPolicy(ws, needed)
	if err != nil {
		return nil, err
	}
	return key.WithWitnesses(p), nil
}
