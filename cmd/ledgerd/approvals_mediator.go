// The mediators' side of approvals (docs/api.md "Approvals"): consuming
// an approval, reporting an outcome, reading an approval's state.

package main

// approvalRoutes are the mediators' approval endpoints.
func (s *server) approvalRoutes() []route { return nil }
