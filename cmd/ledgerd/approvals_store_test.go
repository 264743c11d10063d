package main

import (
	"context"

	"github.com/decisionledger/ledger/approval/preview"
	"github.com/decisionledger/ledger/commit"
)

// storedPreview is the preview srv's store keeps for approval id, and its
// digest; ok false when it keeps none or cannot tell.
func storedPreview(srv *server, id commit.Digest) (doc []byte, digest commit.Digest, ok bool) {
	doc, ok, err := srv.appr.previews.get(context.Background(), id)
	if err != nil || !ok {
		return nil, commit.Digest{}, false
	}
	return doc, preview.Digest(doc), true
}
