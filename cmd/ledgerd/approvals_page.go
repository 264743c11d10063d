// The approver's page (docs/approvals.md "The approver's page").

package main

// pageRoutes are the endpoints of the approver's page.
func (s *server) pageRoutes() []route { return nil }
