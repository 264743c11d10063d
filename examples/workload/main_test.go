package main

import "testing"

// --url defaults to LEDGER_URL, as ledgerctl's does, then to a
// ledgerd started without a config.
func TestDefaultLedgerURL(t *testing.T) {
	t.Setenv("LEDGER_URL", "")
	if got := defaultLedgerURL(); got != "http://127.0.0.1:8080" {
		t.Errorf("without LEDGER_URL: %q", got)
	}
	t.Setenv("LEDGER_URL", "https://ledger.example.com")
	if got := defaultLedgerURL(); got != "https://ledger.example.com" {
		t.Errorf("with LEDGER_URL: %q", got)
	}
}
