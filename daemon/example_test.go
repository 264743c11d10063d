package daemon_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"github.com/decisionledger/ledger/client"
	"github.com/decisionledger/ledger/commit"
	"github.com/decisionledger/ledger/config"
	"github.com/decisionledger/ledger/daemon"
	"github.com/decisionledger/ledger/entry"
	"github.com/decisionledger/ledger/ledger"
)

// A ledgerd in this process: a new key and an empty store in a temporary
// directory, one mediator, one append through package client, whose
// receipt the client verifies with the log's verifier key, and a
// shutdown, which signs the final checkpoint.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "ledgerd-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The signing key, mode 0600, the store's directory, and a config
	// naming them and the mediator's token, of which it keeps the SHA-256.
	skey, _, err := ledger.GenerateKey("ledger.example.com/log")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ledger.key"), []byte(skey+"\n"), 0o600); err != nil {
		log.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "store"), 0o700); err != nil {
		log.Fatal(err)
	}
	const token = "example-mediator-token"
	sum := sha256.Sum256([]byte(token))
	text := config.NewFile("127.0.0.1:0", "ledger.key", "store",
		config.Mediator{Name: "billing", TokenSHA256: hex.EncodeToString(sum[:])})
	path := filepath.Join(dir, "ledgerd.json")
	if err := os.WriteFile(path, text, 0o600); err != nil {
		log.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		log.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	d, err := daemon.Start(ctx, daemon.Options{Config: cfg, ConfigPath: path, Listener: ln})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving", d.Origin())

	c, err := client.New(d.URL(), token, d.VerifierKey())
	if err != nil {
		log.Fatal(err)
	}
	params, err := commit.Params([]byte(`{"to":"payee@example.com","amount_minor":1250}`))
	if err != nil {
		log.Fatal(err)
	}
	r, err := c.Append(ctx, client.Decision{Principal: "agent-1", Action: "make_payment", Decision: entry.Allow,
		Policies: []string{"payments.limit"}, Params: params, Attributes: json.RawMessage(`{}`)})
	if err != nil {
		log.Fatal(err) // also a receipt that does not verify
	}
	fmt.Printf("entry %d: %s %s by %s, mediator %s, verified\n", r.Index, r.Entry.Decision, r.Entry.Action, r.Entry.Principal, r.Entry.Mediator)

	if err := d.Shutdown(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("stopped")
	// Output:
	// serving ledger.example.com/log
	// entry 0: allow make_payment by agent-1, mediator billing, verified
	// stopped
}
