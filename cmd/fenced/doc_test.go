package main

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestPackageDoc_ListsEveryCommand checks that the command list in the
// package doc (main.go) names every runnable command and nothing else.
func TestPackageDoc_ListsEveryCommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		// "\tfenced kv get KEY    read a key": the command, two spaces or
		// more, what it does.
		usage, _, _ := strings.Cut(strings.TrimSpace(line), "  ")
		words := strings.Fields(usage)
		if len(words) < 2 || words[0] != "fenced" {
			continue
		}
		// The command path is the lowercase words after "fenced", up to the
		// first argument or flag.
		path := []string{}
		for _, w := range words[1:] {
			if w != strings.ToLower(w) || strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
				break
			}
			path = append(path, w)
		}
		documented = append(documented, strings.Join(path, " "))
	}
	var real []string
	var walk func(c *cobra.Command, prefix string)
	walk = func(c *cobra.Command, prefix string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			path := strings.TrimSpace(prefix + " " + sub.Name())
			if sub.Runnable() && !sub.HasSubCommands() {
				real = append(real, path)
			}
			walk(sub, path)
		}
	}
	walk(newRootCommand(), "")
	slices.Sort(documented)
	slices.Sort(real)
	if !slices.Equal(documented, real) {
		t.Errorf("main.go's package doc lists commands\n  %v\nbut the binary has\n  %v", documented, real)
	}
}
