package check

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/fenced-dev/fenced/client"
	"github.com/fenced-dev/fenced/internal/launch"
	"github.com/fenced-dev/fenced/internal/tlsfiles"
	"github.com/fenced-dev/fenced/server"
)

// security is what a secure run (Config.Secure) gives nodes and clients:
// the certificates directory (CA and node certificates), the auth file and
// the bearer-token files of the workers' identity and of the harness's own
// admin identity. The zero value is an insecure run.
type security struct {
	certsDir    string
	authFile    string
	workerToken string // file: acquire, read and kv-write on every name
	adminToken  string // file: every permission (membership, status, final reads)
}

// newSecurity creates, under dir, a CA with a certificate for each of
// nodes (setting their CertsDir), and an auth file with two identities:
// "check-worker" for the workers and "check-admin" for the harness.
func newSecurity(dir string, nodes []launch.Node) (security, error) {
	s := security{certsDir: filepath.Join(dir, "certs"), authFile: filepath.Join(dir, "auth.jsonl"),
		workerToken: filepath.Join(dir, "worker.token"), adminToken: filepath.Join(dir, "admin.token")}
	if err := os.MkdirAll(s.certsDir, 0o700); err != nil {
		return security{}, err
	}
	if err := launch.IssueCerts(s.certsDir, nodes); err != nil {
		return security{}, fmt.Errorf("issue certificates: %w", err)
	}
	var lines []byte
	for _, id := range []struct {
		name, tokenFile string
		perms           []string
	}{
		{"check-worker", s.workerToken, []string{"acquire", "read", "kv-write"}},
		{"check-admin", s.adminToken, []string{"acquire", "read", "kv-write", "admin"}},
	} {
		token, hash := server.NewAuthToken()
		if err := os.WriteFile(id.tokenFile, []byte(token+"\n"), 0o600); err != nil {
			return security{}, err
		}
		line, err := json.Marshal(server.AuthEntry{Name: id.name, SHA256: hash,
			Roles: []server.AuthRole{{Prefix: "", Permissions: id.perms}}})
		if err != nil {
			return security{}, err
		}
		lines = append(append(lines, line...), '\n')
	}
	if err := os.WriteFile(s.authFile, lines, 0o600); err != nil {
		return security{}, err
	}
	return s, nil
}

// serveArgs are the flags a node gets beyond launch.Node.ServeArgs.
func (s security) serveArgs() []string {
	if s.authFile == "" {
		return nil
	}
	return []string{"--auth-file", s.authFile}
}

// workerArgs are the hidden worker flags that give a worker the CA and
// its token file.
func (s security) workerArgs() []string {
	if s.certsDir == "" {
		return nil
	}
	return []string{"--worker-ca", s.caFile(), "--worker-token-file", s.workerToken}
}

func (s security) caFile() string { return filepath.Join(s.certsDir, tlsfiles.CACertFile) }

// adminClient is a client of the cluster for the harness itself, with the
// admin identity in a secure run.
func (s security) adminClient(endpoints []string) (*client.Client, error) {
	if s.certsDir == "" {
		return newClient(endpoints, "", "")
	}
	return newClient(endpoints, s.caFile(), s.adminToken)
}

// newClient is a quiet SDK client of endpoints; given a caFile it
// verifies the servers against that CA and sends the token in tokenFile.
func newClient(endpoints []string, caFile, tokenFile string, opts ...client.Option) (*client.Client, error) {
	opts = append(opts, client.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if caFile != "" {
		tc, err := client.LoadTLS(caFile, "", "")
		if err != nil {
			return nil, err
		}
		// The API proxies listen on loopback addresses the node
		// certificates do not name; every node certificate names localhost.
		tc.ServerName = "localhost"
		token, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLS(tc), client.WithBearerToken(strings.TrimSpace(string(token))))
	}
	return client.New(endpoints, opts...)
}
