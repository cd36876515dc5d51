package main_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/internal/proctest"
)

// writeConf writes a config file and returns its path.
func writeConf(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fenced.conf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The command line wins over the environment, which wins over the file;
// --dry-run prints exactly the settings that differ from the defaults, in
// the file's form, and the printed form reads back the same.
func TestServe_ConfigPrecedenceAndDryRun(t *testing.T) {
	dir := t.TempDir()
	conf := writeConf(t, `# a comment
data-dir = `+filepath.Join(dir, "from-file")+`
node-id = file
listen = 127.0.0.1:7790

kv-scope = orders=orders-lock
kv-scope = "jobs=jobs lock"
lock-delay = 2s
`)
	env := []string{"FENCED_SERVE_NODE_ID=env", "FENCED_SERVE_LISTEN=127.0.0.1:7791"}
	out, errOut, code := runFencedEnv(t, env, "serve", "--config", conf, "--listen", "127.0.0.1:7792", "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut)
	}
	want := "data-dir = " + filepath.Join(dir, "from-file") + "\n" +
		"kv-scope = orders=orders-lock\nkv-scope = jobs=jobs lock\n" +
		"listen = 127.0.0.1:7792\nlock-delay = 2s\nnode-id = env\n"
	if out != want {
		t.Fatalf("dry run printed\n%s\nwant\n%s", out, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "from-file")); !os.IsNotExist(err) {
		t.Fatalf("the dry run created the data dir (%v)", err)
	}
	// What it prints is a config file that means the same.
	again, errOut, code := runFencedEnv(t, nil, "serve", "--config", writeConf(t, out), "--dry-run")
	if code != 0 || again != out {
		t.Fatalf("dry run of the printed settings: exit %d %s\n%s", code, errOut, again)
	}
	// FENCED_SERVE_CONFIG names the file when --config is absent.
	viaEnv, _, code := runFencedEnv(t, []string{"FENCED_SERVE_CONFIG=" + conf}, "serve", "--dry-run")
	if code != 0 || !strings.Contains(viaEnv, "node-id = file") {
		t.Fatalf("FENCED_SERVE_CONFIG: exit %d\n%s", code, viaEnv)
	}
}

// A mistake in the file or the environment exits 2 naming FILE:LINE or
// the variable, and nothing starts: no data dir, no listener.
func TestServe_ConfigMistakesExit2AndStartNothing(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	listen := proctest.FreeAddr(t)
	head := "data-dir = " + dataDir + "\nlisten = " + listen + "\n"
	for _, tt := range []struct {
		name, conf string
		env        []string
		want       string
	}{
		{"unknown setting", head + "\nlisten-addr = 1\n", nil, "fenced.conf:4: \"listen-addr\" is no setting"},
		{"no equals sign", head + "node-id\n", nil, "fenced.conf:3: want \"flag-name = value\""},
		{"bad value", head + "# x\nlock-delay = soon\n", nil, "fenced.conf:4: lock-delay: invalid argument"},
		{"set twice", head + "node-id = a\nnode-id = b\n", nil, "fenced.conf:4: node-id is set twice (first on line 3)"},
		{"a hidden test hook", head + "test-event-log = x\n", nil, "fenced.conf:3: \"test-event-log\" is no setting"},
		{"bad quoting", head + "node-id = \"a\n", nil, "fenced.conf:3: node-id: the quoted value"},
		{"unknown variable", head, []string{"FENCED_SERVE_LISTN=127.0.0.1:1"}, "environment variable FENCED_SERVE_LISTN names no setting"},
		{"bad variable value", head, []string{"FENCED_SERVE_TOKEN_FLOOR=-1"}, "environment variable FENCED_SERVE_TOKEN_FLOOR: invalid argument"},
		{"settings that do not validate", head + "lock-delay = 2m\n", nil, "lock delay"},
		{"a heap floor out of range", head + "gc-heap-floor-mib = 70000\n", nil, "--gc-heap-floor-mib 70000: want 0 (off) to 65536"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runFencedEnv(t, tt.env, "serve", "--config", writeConf(t, tt.conf))
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut, tt.want)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Fatalf("a refused config created the data dir (%v)", err)
			}
			if ln, err := net.Listen("tcp", listen); err != nil {
				t.Fatalf("the API address is taken: %v", err)
			} else {
				ln.Close()
			}
		})
	}
}

// unitCommands returns the ExecStartPre and ExecStart command lines of a
// systemd unit.
func unitCommands(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for _, key := range []string{"ExecStartPre=", "ExecStart="} {
			if v, ok := strings.CutPrefix(sc.Text(), key); ok {
				cmds = append(cmds, strings.Fields(v))
			}
		}
	}
	return cmds
}

// imageCommand returns the ENTRYPOINT and CMD of a Dockerfile's last
// stage (exec form) and its ENV settings.
func imageCommand(t *testing.T, path string) (argv, env []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var entry, cmd []string
	for _, line := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
		kw, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch kw {
		case "FROM":
			entry, cmd, env = nil, nil, nil
		case "ENTRYPOINT", "CMD":
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("%s %s is not in exec form: %v", kw, rest, err)
			}
			if kw == "CMD" {
				cmd = v
			} else {
				entry = v
			}
		case "ENV":
			env = append(env, strings.Fields(rest)...)
		}
	}
	return append(entry, cmd...), env
}

// The shipped systemd unit's and container image's command lines, run as
// they are against the shipped config (the paths of the installed files
// mapped to the repository's), pass --dry-run and serve on the README's
// addresses.
func TestDeploy_ShippedCommandLinesValidate(t *testing.T) {
	deploy, err := filepath.Abs(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(deploy, "fenced.conf")
	run := func(what string, argv, env []string) {
		t.Helper()
		if len(argv) < 2 || argv[0] != "/usr/local/bin/fenced" {
			t.Fatalf("%s runs %v, want /usr/local/bin/fenced", what, argv)
		}
		var args []string
		for _, a := range argv[1:] {
			args = append(args, strings.ReplaceAll(a, "/etc/fenced/fenced.conf", conf))
		}
		if !strings.Contains(strings.Join(args, " "), "--config "+conf) {
			t.Fatalf("%s does not read the shipped config: %v", what, argv)
		}
		if !strings.Contains(strings.Join(args, " "), "--dry-run") {
			args = append(args, "--dry-run")
		}
		out, errOut, code := runFencedEnv(t, env, args...)
		if code != 0 {
			t.Fatalf("%s: fenced %v: exit %d: %s", what, args, code, errOut)
		}
		for _, want := range []string{"data-dir = /var/lib/fenced/data\n", "audit-log = /var/lib/fenced/audit.log\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the settings printed lack %q:\n%s", what, want, out)
			}
		}
		if strings.Contains(out, "listen =") {
			t.Errorf("%s: listens elsewhere than the README's defaults:\n%s", what, out)
		}
	}
	cmds := unitCommands(t, filepath.Join(deploy, "fenced.service"))
	if len(cmds) != 2 {
		t.Fatalf("the unit has %d ExecStart lines, want ExecStartPre and ExecStart", len(cmds))
	}
	for _, c := range cmds {
		run("fenced.service", c, nil)
	}
	argv, env := imageCommand(t, filepath.Join(deploy, "Dockerfile"))
	run("Dockerfile", argv, env)
}
