package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/decisionledger/ledger/internal/apitest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMonitorScripts runs testdata/monitor/*.txtar: the compliance job
// end to end, with real ledgerd servers (in this process) and the
// ledger-verify binary (built once). Besides TestScripts' ledgerd:
//
//	serve NAME DIR          ledgerd serve --data DIR on a free port; $NAME is its URL
//	stop NAME               stop it
//	append URL TOKEN FROM N append entries FROM..FROM+N-1 (appendBody), the last with ?wait=checkpoint
//	fetch URL FILE          GET URL into FILE (200 only)
//	grab REGEXP FILE        write the first submatch of REGEXP in the last stdout to FILE
//	verifier STATUS ARGS... run ledger-verify ARGS, expecting exit status STATUS
//	flip-proof FILE         flip a bit of the first hash of a consistency proof file
func TestMonitorScripts(t *testing.T) {
	bin := built(t, "../ledger-verify")
	testscript.Run(t, testscript.Params{
		Dir: "testdata/monitor",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"ledgerd": func(ts *testscript.TestScript, neg bool, args []string) {
				code := run(context.Background(), args, ts.Stdout(), ts.Stderr())
				if (code != 0) != neg {
					ts.Fatalf("ledgerd exited %d", code)
				}
			},
			"serve":      scriptServe,
			"stop":       scriptStop,
			"append":     scriptAppend,
			"fetch":      scriptFetch,
			"grab":       scriptGrab,
			"flip-proof": scriptFlipProof,
			"verifier": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 1 {
					ts.Fatalf("usage: verifier STATUS ARGS...")
				}
				want, err := strconv.Atoi(args[0])
				ts.Check(err)
				cmd := exec.Command(bin, args[1:]...)
				cmd.Dir = ts.Getenv("WORK")
				cmd.Stdout, cmd.Stderr = ts.Stdout(), ts.Stderr()
				err = cmd.Run()
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("ledger-verify: %v", err)
				}
				if code != want {
					ts.Fatalf("ledger-verify exited %d, want %d", code, want)
				}
			},
		},
	})
}

type scriptServer struct {
	stop func()
	done chan int
	out  *apitest.LockedBuffer
}

var (
	scriptServersMu sync.Mutex
	scriptServers   = map[*testscript.TestScript]map[string]*scriptServer{}
)

func scriptServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: serve NAME DIR")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &scriptServer{stop: cancel, done: make(chan int, 1), out: &apitest.LockedBuffer{}}
	go func() {
		s.done <- run(ctx, []string{"serve", "--data", ts.MkAbs(args[1]), "--listen", "127.0.0.1:0"}, s.out, s.out)
	}()
	re := regexp.MustCompile(`serving \S+ on (http://\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := re.FindStringSubmatch(s.out.String()); m != nil {
			ts.Setenv(args[0], m[1])
			break
		}
		select {
		case code := <-s.done:
			ts.Fatalf("ledgerd serve exited %d:\n%s", code, s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			ts.Fatalf("ledgerd serve did not start:\n%s", s.out.String())
		}
	}
	scriptServersMu.Lock()
	if scriptServers[ts] == nil {
		scriptServers[ts] = map[string]*scriptServer{}
		ts.Defer(func() {
			scriptServersMu.Lock()
			servers := scriptServers[ts]
			delete(scriptServers, ts)
			scriptServersMu.Unlock()
			for _, s := range servers {
				s.stop()
				<-s.done
			}
		})
	}
	scriptServers[ts][args[0]] = s
	scriptServersMu.Unlock()
}

func scriptStop(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stop NAME")
	}
	scriptServersMu.Lock()
	s := scriptServers[ts][args[0]]
	delete(scriptServers[ts], args[0])
	scriptServersMu.Unlock()
	if s == nil {
		ts.Fatalf("no server %s", args[0])
	}
	s.stop()
	if code := <-s.done; code != 0 {
		ts.Fatalf("ledgerd serve exited %d:\n%s", code, s.out.String())
	}
}

func scriptAppend(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: append URL TOKENFILE FROM N")
	}
	token := strings.TrimSpace(ts.ReadFile(args[1]))
	from, err := strconv.Atoi(args[2])
	ts.Check(err)
	n, err := strconv.Atoi(args[3])
	ts.Check(err)
	for i := from; i < from+n; i++ {
		u := args[0] + "/v1/entries"
		if i == from+n-1 {
			u += "?wait=checkpoint"
		}
		req, _ := http.NewRequest("POST", u, strings.NewReader(apitest.AppendBody(i)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		ts.Check(err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			ts.Fatalf("append %d: %d %s", i, resp.StatusCode, b)
		}
	}
}

func scriptFetch(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: fetch URL FILE")
	}
	resp, err := http.Get(args[0])
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	if resp.StatusCode != http.StatusOK {
		ts.Fatalf("GET %s: %d %s", args[0], resp.StatusCode, b)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o644))
}

func scriptGrab(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: grab REGEXP FILE")
	}
	m := regexp.MustCompile(args[0]).FindStringSubmatch(ts.ReadFile("stdout"))
	if len(m) < 2 {
		ts.Fatalf("no match for %s in stdout", args[0])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(m[1]+"\n"), 0o600))
}

func scriptFlipProof(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: flip-proof FILE")
	}
	var p map[string]any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[0])), &p))
	hashes, _ := p["hashes"].([]any)
	if len(hashes) == 0 {
		ts.Fatalf("%s: no hashes to flip", args[0])
	}
	var h []byte
	ts.Check(json.Unmarshal([]byte(fmt.Sprintf("%q", hashes[0])), &h))
	h[0] ^= 1
	hashes[0] = h
	b, err := json.Marshal(p)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
}
