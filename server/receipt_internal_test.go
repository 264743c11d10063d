package server

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/decisionledger/ledger/ledger"
)

// TestAppendReceipt holds the hand-built answer to an append to the format
// it replaced, with and without a head and an inclusion proof.
func TestAppendReceipt(t *testing.T) {
	receipt := ledger.Receipt{Index: 1<<64 - 1, Entry: []byte(`{"v":3}`)}
	for i := range receipt.LeafHash {
		receipt.LeafHash[i] = byte(i * 7)
	}
	for _, head := range [][]byte{nil, []byte(`"decision":"allow",`)} {
		for _, proof := range [][]byte{nil, []byte(`{"tree_size":2}`)} {
			got := appendReceipt(append([]byte{'{'}, head...), receipt, proof)
			want := fmt.Sprintf(`{%s"index":%d,"leaf_hash":"%x","entry":%s}`+"\n", head, receipt.Index, receipt.LeafHash, receipt.Entry)
			if proof != nil {
				want = fmt.Sprintf(`{%s"index":%d,"leaf_hash":"%x","entry":%s,"inclusion":%s}`+"\n", head, receipt.Index, receipt.LeafHash, receipt.Entry, proof)
			}
			if !bytes.Equal(got, []byte(want)) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		}
	}
}
