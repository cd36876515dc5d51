package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Settings of fenced serve from a file and the environment
// (docs/operations.md, "Packaging"). Every flag of fenced serve that is not
// hidden (the test hooks) can be set
//
//   - in the file of --config (or FENCED_SERVE_CONFIG): one "flag-name =
//     value" a line, the flag's name without "--"; blank lines and lines
//     starting with # are ignored; a value in double quotes is unquoted
//     (Go syntax); a repeatable flag (--kv-scope) takes one value a line;
//   - in the environment: FENCED_SERVE_ and the flag's name in capitals
//     with - as _ (FENCED_SERVE_DATA_DIR for --data-dir).
//
// The command line wins over the environment, which wins over the file. A
// line or variable naming no flag, a value the flag refuses and a flag set
// twice in the file (but a repeatable one) are errors naming FILE:LINE or
// the variable; fenced serve then exits 2 before it starts anything.

// envPrefix starts the environment variables of fenced serve's flags.
const envPrefix = "FENCED_SERVE_"

// configEnv names the config file when --config is not given.
const configEnv = envPrefix + "CONFIG"

// notSettings are the flags that only the command line sets.
var notSettings = map[string]bool{"config": true, "dry-run": true, "help": true}

// settable reports whether f can come from the file or the environment.
func settable(f *pflag.Flag) bool { return f != nil && !f.Hidden && !notSettings[f.Name] }

// envName is the environment variable of the flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// repeatable reports whether the flag takes several values (each Set adds one).
func repeatable(f *pflag.Flag) bool {
	t := f.Value.Type()
	return strings.HasSuffix(t, "Array") || strings.HasSuffix(t, "Slice")
}

// applySettings sets the flags of fs that the command line did not set
// from environ (KEY=VALUE) and then from the file at path ("" for none).
func applySettings(fs *pflag.FlagSet, path string, environ []string) error {
	fromCmdline := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { fromCmdline[f.Name] = true })
	fromEnv := map[string]bool{}
	var vars []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, envPrefix) {
			vars = append(vars, kv)
		}
	}
	sort.Strings(vars)
	for _, kv := range vars {
		key, value, _ := strings.Cut(kv, "=")
		if key == configEnv {
			continue
		}
		name := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, envPrefix)), "_", "-")
		f := fs.Lookup(name)
		if !settable(f) {
			return fmt.Errorf("environment variable %s names no setting of fenced serve (want %s and a flag's name, e.g. %s)", key, envPrefix, envName("data-dir"))
		}
		if fromCmdline[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("environment variable %s: %v", key, err)
		}
		fromEnv[name] = true
	}
	if path == "" {
		return nil
	}
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("--config: %v", err)
	}
	defer file.Close()
	return applyFile(fs, path, file, func(name string) bool { return fromCmdline[name] || fromEnv[name] })
}

// applyFile sets the flags named in r's lines, but those skip reports.
func applyFile(fs *pflag.FlagSet, path string, r io.Reader, skip func(name string) bool) error {
	firstLine := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return fmt.Errorf("%s:%d: want \"flag-name = value\", got %q", path, n, line)
		}
		f := fs.Lookup(strings.TrimPrefix(name, "--"))
		if !settable(f) {
			return fmt.Errorf("%s:%d: %q is no setting of fenced serve (the names are its flags without \"--\": fenced serve --help)", path, n, name)
		}
		if first, twice := firstLine[f.Name]; twice && !repeatable(f) {
			return fmt.Errorf("%s:%d: %s is set twice (first on line %d)", path, n, f.Name, first)
		}
		firstLine[f.Name] = n
		if strings.HasPrefix(value, `"`) {
			uq, err := strconv.Unquote(value)
			if err != nil {
				return fmt.Errorf("%s:%d: %s: the quoted value %s does not parse: %v", path, n, f.Name, value, err)
			}
			value = uq
		}
		if skip(f.Name) {
			continue
		}
		if err := fs.Set(f.Name, value); err != nil {
			return fmt.Errorf("%s:%d: %s: %v", path, n, f.Name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// writeSettings prints the settings of fs that differ from their defaults,
// in the file's form, sorted by name.
func writeSettings(w io.Writer, fs *pflag.FlagSet) error {
	var lines []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !settable(f) {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok && repeatable(f) {
			for _, v := range sv.GetSlice() {
				lines = append(lines, f.Name+" = "+settingValue(v))
			}
			return
		}
		if v := f.Value.String(); v != f.DefValue {
			lines = append(lines, f.Name+" = "+settingValue(v))
		}
	})
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}

// settingValue quotes a value the file would not read back as it is.
func settingValue(v string) string {
	if v == "" || v != strings.TrimSpace(v) || strings.HasPrefix(v, `"`) || strings.ContainsAny(v, "\n\r") {
		return strconv.Quote(v)
	}
	return v
}
