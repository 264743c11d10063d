package policy

// NewReplay builds a set from files for replaying recorded decisions
// without the declarations. It checks what New checks but the schema: the
// file names and bounds, that every file parses, and every policy's
// annotations and ids, with the same *LoadError values (file:line:col).
// It does not typecheck the policies, and Decide on the set does not check
// the request against a schema; the strict-domain refusal of
// the attributes still applies.
//
// Cedar's evaluation does not read the schema, so for every request a
// set New built from the same files admits, the replay set's Decide
// returns the same Result. What a replay set does not do is refuse: a
// policy the schema would refuse (naming an undeclared attribute, say)
// is accepted, and a request the schema would not admit is evaluated.
// The schema gate is ledgerd's, at load; an auditor who holds the
// declarations checks the request with them separately.
func NewReplay(files []File) (*Set, error) {
	files, err := checkFiles(files)
	if err != nil {
		return nil, err
	}
	return newSet(files, nil, nil, nil)
}
