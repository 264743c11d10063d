// The reload's view of two configs (docs/config.md "Reload"): which
// credentials changed, and which other members changed and need a
// restart. Putting credentials in force is ledgerd's.

package config

import (
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/decisionledger/ledger/approval/approver"
)

// CredentialChanges is what a reload changed, by name: never a token's
// hash nor a password's. DiffCredentials leaves SessionsEnded 0: it
// counts the approvers' sessions that whoever puts the change in force
// ends.
type CredentialChanges struct {
	MediatorsAdded, MediatorsRemoved, TokensRotated, RatesChanged []string
	ReadersChanged                                                bool
	ApproversAdded, ApproversRemoved, ApproversChanged            []string
	SessionsEnded                                                 int
}

// LogValue lists the names; empty lists are left out.
func (ch CredentialChanges) LogValue() slog.Value {
	var attrs []slog.Attr
	add := func(key string, names []string) {
		if len(names) > 0 {
			attrs = append(attrs, slog.String(key, strings.Join(names, ",")))
		}
	}
	add("mediators_added", ch.MediatorsAdded)
	add("mediators_removed", ch.MediatorsRemoved)
	add("tokens_rotated", ch.TokensRotated)
	add("rates_changed", ch.RatesChanged)
	if ch.ReadersChanged {
		attrs = append(attrs, slog.Bool("reader_tokens_changed", true))
	}
	add("approvers_added", ch.ApproversAdded)
	add("approvers_removed", ch.ApproversRemoved)
	add("approvers_changed", ch.ApproversChanged)
	if ch.SessionsEnded > 0 {
		attrs = append(attrs, slog.Int("approver_sessions_ended", ch.SessionsEnded))
	}
	return slog.GroupValue(attrs...)
}

// DiffCredentials names what changes from old's credentials to next's.
// ApproversChanged are those whose password changed (their sessions
// end); an approver whose actions or principals changed keeps their
// sessions, judged by the new ones.
func DiffCredentials(old, next *Config) CredentialChanges {
	var ch CredentialChanges
	olds := map[string]Mediator{}
	for _, m := range old.Mediators {
		olds[m.Name] = m
	}
	for _, m := range next.Mediators {
		o, ok := olds[m.Name]
		switch {
		case !ok:
			ch.MediatorsAdded = append(ch.MediatorsAdded, m.Name)
		case o.TokenSHA256 != m.TokenSHA256:
			ch.TokensRotated = append(ch.TokensRotated, m.Name)
		}
		if ok && (o.RatePerSecond != m.RatePerSecond || o.Burst != m.Burst) {
			ch.RatesChanged = append(ch.RatesChanged, m.Name)
		}
		delete(olds, m.Name)
	}
	ch.MediatorsRemoved = slices.Sorted(maps.Keys(olds))
	ch.ReadersChanged = !slices.Equal(old.ReaderTokensSHA256, next.ReaderTokensSHA256)
	approvers := func(c *Config) map[string]approver.Approver {
		m := map[string]approver.Approver{}
		if c.Approvals != nil {
			for _, a := range c.Approvals.Approvers {
				m[a.Name] = a
			}
		}
		return m
	}
	oldA, newA := approvers(old), approvers(next)
	for _, name := range slices.Sorted(maps.Keys(newA)) {
		o, ok := oldA[name]
		switch {
		case !ok:
			ch.ApproversAdded = append(ch.ApproversAdded, name)
		case o.PasswordHash != newA[name].PasswordHash:
			ch.ApproversChanged = append(ch.ApproversChanged, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(oldA)) {
		if _, ok := newA[name]; !ok {
			ch.ApproversRemoved = append(ch.ApproversRemoved, name)
		}
	}
	return ch
}

// reloadable are the config's members a reload puts in force, by JSON
// name; approvals and tls are compared member by member (RestartFields).
var reloadable = map[string]bool{"mediators": true, "reader_tokens_sha256": true, "approvals": true, "tls": true}

// RestartFields names the members of the config that differ between
// start (the file's config at start) and next and that only a restart
// puts in force: every member but the credentials, of approvals every
// member but approvers, and of tls client_ca_file. approvals and tls
// themselves are named when they appear or go away: the approval
// endpoints and HTTPS are on or off from the start (approvers still
// change: none when approvals went away).
func RestartFields(start, next *Config) []string {
	var names []string
	sv, nv := reflect.ValueOf(start).Elem(), reflect.ValueOf(next).Elem()
	for i := range sv.NumField() {
		name, _, _ := strings.Cut(sv.Type().Field(i).Tag.Get("json"), ",")
		if reloadable[name] {
			continue
		}
		if !reflect.DeepEqual(sv.Field(i).Interface(), nv.Field(i).Interface()) {
			names = append(names, name)
		}
	}
	switch a, b := start.TLS, next.TLS; {
	case (a == nil) != (b == nil):
		names = append(names, "tls")
	case a != nil && a.ClientCAFile != b.ClientCAFile:
		names = append(names, "tls.client_ca_file")
	}
	switch a, b := start.Approvals, next.Approvals; {
	case (a == nil) != (b == nil):
		names = append(names, "approvals")
	case a != nil:
		if a.PendingTTL != b.PendingTTL {
			names = append(names, "approvals.pending_ttl")
		}
		if a.ExecutionTTL != b.ExecutionTTL {
			names = append(names, "approvals.execution_ttl")
		}
		if !slices.Equal(a.TrustedOrigins, b.TrustedOrigins) {
			names = append(names, "approvals.trusted_origins")
		}
	}
	return names
}
