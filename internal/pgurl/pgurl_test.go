package pgurl

import "testing"

// Every form of connection string comes out without its password, the
// rest as it was (hand-written expectations).
func TestRedact(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://ledger:hunter2secret@db.example.org/ledger", "postgres://ledger:xxxxx@db.example.org/ledger"},
		{"postgresql://ledger:hunter2secret@db.example.org:5433/ledger?sslmode=verify-full", "postgresql://ledger:xxxxx@db.example.org:5433/ledger?sslmode=verify-full"},
		{"postgres://db.example.org/ledger?password=hunter2secret&connect_timeout=x", "postgres://db.example.org/ledger?connect_timeout=x&password=xxxxx"},
		{"postgres://ledger@db.example.org/ledger", "postgres://ledger@db.example.org/ledger"},
		{"postgres://ledger:hunter2secret@db.example.org:notaport/ledger", "postgres://(unparsable URL)"},
		{"mysql://ledger:hunter2secret@db.example.org/ledger", "mysql://(unparsable URL)"},
		{"host=/run/postgresql user=ledger password=hunter2secret dbname=ledger", "host=/run/postgresql user=ledger password=xxxxx dbname=ledger"},
		{"host=/run/postgresql password = 'hunter2 \\'secret' dbname=ledger", "host=/run/postgresql password=xxxxx dbname=ledger"},
		{"host=/run/postgresql dbname=ledger", "host=/run/postgresql dbname=ledger"},
	} {
		if got := Redact(c.in); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
