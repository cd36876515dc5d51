package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newManCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "man --dir DIR",
		Short: "Write a man page for every command into DIR",
		Long: `Write a man page (section 1, roff) for fenced and each of its commands
into DIR, from the same definitions as --help: fenced.1, fenced-serve.1,
fenced-cluster-status.1, ... Read one with "man DIR/fenced-acquire.1"; install
them by copying them into a man1 directory of MANPATH.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usageError("--dir is required: the directory to write the man pages into")
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			n := 0
			var walk func(c *cobra.Command) error
			walk = func(c *cobra.Command) error {
				if c.Hidden || c.Name() == "help" {
					return nil
				}
				name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
				if err := os.WriteFile(filepath.Join(dir, name), manPage(c), 0o644); err != nil {
					return err
				}
				n++
				for _, sub := range c.Commands() {
					if err := walk(sub); err != nil {
						return err
					}
				}
				return nil
			}
			if err := walk(cmd.Root()); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "wrote %d man pages to %s\n", n, dir)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write the man pages into (created if missing; required)")
	return cmd
}

// manPage renders one command as a roff man page.
func manPage(c *cobra.Command) []byte {
	var b bytes.Buffer
	title := strings.ToUpper(strings.ReplaceAll(c.CommandPath(), " ", "-"))
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"fenced\" \"fenced manual\"\n", title)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roff(strings.ReplaceAll(c.CommandPath(), " ", "-")), roff(c.Short))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n", roff(c.UseLine()))
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	fmt.Fprintf(&b, ".SH DESCRIPTION\n%s\n", roff(desc))
	var flags []*pflag.Flag
	c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			flags = append(flags, f)
		}
	})
	if len(flags) > 0 {
		sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
		b.WriteString(".SH OPTIONS\n")
		for _, f := range flags {
			head := "\\-\\-" + f.Name
			if f.Shorthand != "" {
				head = "\\-" + f.Shorthand + ", " + head
			}
			usage := f.Usage
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
				usage += " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", head, roff(usage))
		}
	}
	var see []string
	if c.HasParent() {
		see = append(see, strings.ReplaceAll(c.Parent().CommandPath(), " ", "-")+"(1)")
	}
	for _, sub := range c.Commands() {
		if !sub.Hidden && sub.Name() != "help" {
			see = append(see, strings.ReplaceAll(sub.CommandPath(), " ", "-")+"(1)")
		}
	}
	if len(see) > 0 {
		fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", strings.Join(see, ", "))
	}
	return b.Bytes()
}

// roff escapes text for a man page: backslashes, and a leading dot or
// quote that roff would read as a request.
func roff(s string) string {
	s = strings.ReplaceAll(s, "\\", "\\e")
	s = strings.ReplaceAll(s, "-", "\\-")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = "\\&" + l
		}
		if strings.TrimSpace(l) == "" {
			lines[i] = ".PP"
		}
	}
	return strings.Join(lines, "\n")
}
