// Package shelltest gives the command scripts (testscript) their shell
// conditions: [zsh] is true when zsh is on PATH. Under LEDGER_CI=1, where
// .ci/run installs zsh, a missing zsh fails the script instead of
// skipping its lines.
package shelltest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
)

// Condition is a testscript.Params Condition for [zsh].
func Condition(cond string) (bool, error) {
	if cond != "zsh" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	if _, err := exec.LookPath("zsh"); err != nil {
		if os.Getenv("LEDGER_CI") == "1" {
			return false, errors.New("zsh is not on PATH (LEDGER_CI=1: .ci/run installs Debian's zsh)")
		}
		return false, nil
	}
	return true, nil
}
