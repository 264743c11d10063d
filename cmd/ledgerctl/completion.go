package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/decisionledger/ledger/internal/completion"
)

// completedCommands are the commands "ledgerctl completion" completes,
// each by its words.
var completedCommands = [][]string{
	{"append"}, {"get"}, {"proof"}, {"checkpoint"}, {"disclose"}, {"decide"}, {"export"}, {"minimize"},
	{"approval", "get"}, {"approval", "wait"}, {"approval", "consume"}, {"approval", "outcome"},
	{"completion"}, {"version"},
}

// runCompletion prints the bash or zsh completion script, made from the
// help every command prints (whose options are its flag set's), so that
// it cannot offer an option the command lacks or miss one it has.
func runCompletion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Fprint(stdout, synopsisAndText("completion"))
		return exitOK
	}
	if len(args) != 1 || (args[0] != "bash" && args[0] != "zsh") {
		errorf(stderr, "completion: needs one shell: bash or zsh")
		hintf(stderr, "usage: %s completion (bash | zsh)", programName)
		return exitUsage
	}
	cmds, err := commandsForCompletion()
	if err != nil {
		errorf(stderr, "completion: %v", err)
		return exitFailed
	}
	if args[0] == "bash" {
		fmt.Fprint(stdout, completion.Bash(programName, cmds))
	} else {
		fmt.Fprint(stdout, completion.Zsh(programName, cmds))
	}
	return exitOK
}

// commandsForCompletion asks every command for its --help and reads its
// options from it.
func commandsForCompletion() ([]completion.Command, error) {
	var cmds []completion.Command
	for _, words := range completedCommands {
		var help, errs strings.Builder
		switch {
		case words[0] == "completion":
			help.WriteString(synopsisAndText("completion"))
		case words[0] == "version":
		default:
			if code := run(append(words[:len(words):len(words)], "--help"), strings.NewReader(""), &help, &errs); code != exitOK {
				return nil, fmt.Errorf("%s --help: exit %d: %s", strings.Join(words, " "), code, errs.String())
			}
		}
		c := completion.FromHelp(words, help.String())
		if words[0] == "completion" {
			c.Args = []string{"bash", "zsh"}
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}
