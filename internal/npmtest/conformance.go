package npmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// conformanceTimeout bounds one run of the suite (about 3 s against
// server-everything on an idle machine).
const conformanceTimeout = 5 * time.Minute

// Conformance runs the conformance suite's active server scenarios
// against the streamable HTTP endpoint url, as
//
//	conformance server --url URL -o DIR
//
// and returns the scenarios that passed and those that failed, each
// sorted. A scenario fails when any of its checks has status FAILURE or
// it could not run (as the suite's own summary counts it); WARNING and
// INFO checks do not fail it. t fails when the suite did not run, or its
// results do not cover every scenario it announced; a failing scenario
// does not fail t: the caller compares the lists with what it expects.
// Each failed scenario's first error message is logged. It skips t as
// Dir does.
//
// The suite sends no Authorization header: url must answer without one.
func Conformance(t testing.TB, url string) (passed, failed []string) {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), conformanceTimeout)
	defer cancel()
	cmd := nodeCommand(t, ctx, Bin(t, "conformance"), "server", "--url", url, "-o", out)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	// It exits 1 when a scenario fails: the results say which.
	runErr := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("npmtest: conformance did not finish within %v:\n%s", conformanceTimeout, quote(output.Bytes()))
	}
	results, err := parseResults(out, output.Bytes())
	if err != nil {
		t.Fatalf("npmtest: conformance (%v): %v\n%s", runErr, err, quote(output.Bytes()))
	}
	for _, r := range results {
		if r.failed {
			failed = append(failed, r.scenario)
			t.Logf("conformance: %s failed: %s", r.scenario, r.reason)
		} else {
			passed = append(passed, r.scenario)
		}
	}
	return passed, failed
}

// scenarioResult is one scenario's outcome.
type scenarioResult struct {
	scenario string
	failed   bool
	reason   string // the first failed check's id and error message
}

var (
	// The suite saves scenario S's checks in DIR/server-S-<timestamp>/
	// checks.json, the timestamp an ISO 8601 one with - for : and .
	resultDirRE = regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z$`)
	// and prints "Running active suite (N scenarios) against URL".
	suiteLineRE = regexp.MustCompile(`(?m)^Running \S+ suite \((\d+) scenarios\) against `)
	// and "=== Running scenario: S ===" before each.
	scenarioLineRE = regexp.MustCompile(`(?m)^=== Running scenario: (\S+) ===$`)
)

var errResults = errors.New("results")

// parseResults reads the scenario results that the suite saved under
// dir, and checks them against the scenarios that its output announced.
func parseResults(dir string, output []byte) ([]scenarioResult, error) {
	m := suiteLineRE.FindSubmatch(output)
	if m == nil {
		return nil, fmt.Errorf("%w: no %q line in its output", errResults, "Running active suite (N scenarios)")
	}
	total, _ := strconv.Atoi(string(m[1]))
	announced := map[string]bool{}
	for _, m := range scenarioLineRE.FindAllSubmatch(output, -1) {
		announced[string(m[1])] = true
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errResults, err)
	}
	var results []scenarioResult
	seen := map[string]bool{}
	for _, e := range entries {
		m := resultDirRE.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			return nil, fmt.Errorf("%w: unexpected entry %q in the results directory", errResults, e.Name())
		}
		name := m[1]
		if seen[name] {
			return nil, fmt.Errorf("%w: scenario %s has two result directories", errResults, name)
		}
		seen[name] = true
		r := scenarioResult{scenario: name}
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			// The suite makes the directory, then runs the scenario; one
			// that threw saved no checks (the output says why).
			r.failed, r.reason = true, "the scenario did not run to its end (no checks.json)"
		case err != nil:
			return nil, fmt.Errorf("%w: %w", errResults, err)
		default:
			var checks []struct {
				ID           string `json:"id"`
				Status       string `json:"status"`
				ErrorMessage string `json:"errorMessage"`
			}
			if err := json.Unmarshal(data, &checks); err != nil {
				return nil, fmt.Errorf("%w: scenario %s: checks.json: %w", errResults, name, err)
			}
			if len(checks) == 0 {
				return nil, fmt.Errorf("%w: scenario %s: checks.json holds no checks", errResults, name)
			}
			for _, c := range checks {
				switch c.Status {
				case "SUCCESS", "WARNING", "INFO":
				case "FAILURE":
					if !r.failed {
						r.failed, r.reason = true, c.ID+": "+truncate(c.ErrorMessage, 200)
					}
				default:
					return nil, fmt.Errorf("%w: scenario %s: check %s has unknown status %q", errResults, name, c.ID, c.Status)
				}
			}
		}
		results = append(results, r)
	}
	for name := range announced {
		if !seen[name] {
			return nil, fmt.Errorf("%w: scenario %s ran but saved no results", errResults, name)
		}
	}
	if len(results) != total || len(announced) != total {
		return nil, fmt.Errorf("%w: the suite announced %d scenarios, ran %d and saved %d", errResults, total, len(announced), len(results))
	}
	sort.Slice(results, func(i, j int) bool { return results[i].scenario < results[j].scenario })
	return results, nil
}

// quote gives the end of the suite's output for a test log: its last 40
// lines, each cut at 300 bytes (node prints a minified bundle's whole
// line with an error in it), indented so that its closing "Total: N
// passed, M failed" line is not read as the test run's own.
func quote(out []byte) string {
	lines := strings.Split(lastLines(out, 40), "\n")
	for i, l := range lines {
		lines[i] = "\t| " + truncate(l, 300)
	}
	return strings.Join(lines, "\n")
}

// truncate shortens s to at most n bytes (on a rune boundary).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
