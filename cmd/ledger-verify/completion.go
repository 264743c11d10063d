package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/decisionledger/ledger/internal/completion"
)

const completionUsage = `Usage:
    ledger-verify completion (bash | zsh)

Print the completion script for bash or zsh, made from every command's
usage text (which the tests hold to the options each command defines):
commands complete, then their options, then files (and directories after
an option that takes one).

Examples:
    $ source <(ledger-verify completion bash)     # in ~/.bashrc
    $ source <(ledger-verify completion zsh)      # in ~/.zshrc
    $ ledger-verify completion bash > /etc/bash_completion.d/ledger-verify
`

// runCompletion prints the completion script for one shell.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		fmt.Fprint(stdout, completionUsage)
		return exitOK
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		return usageError(stderr, "completion", "needs one shell: bash or zsh")
	}
	cmds := completedCommands()
	if args[0] == "bash" {
		fmt.Fprint(stdout, completion.Bash(programName, cmds))
	} else {
		fmt.Fprint(stdout, completion.Zsh(programName, cmds))
	}
	return exitOK
}

// completedCommands are every command with the options its usage text
// names, and help and completion with their arguments.
func completedCommands() []completion.Command {
	var cmds []completion.Command
	var names []string
	for _, c := range commands {
		cmds = append(cmds, completion.FromHelp([]string{c.name}, c.usage))
		names = append(names, c.name)
	}
	return append(cmds,
		completion.Command{Words: []string{"help"}, Args: names},
		completion.Command{Words: []string{"completion"}, Args: []string{"bash", "zsh"}})
}
