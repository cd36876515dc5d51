package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// AuditConfig configures the audit log: authentication failures, denials
// and admin actions, one JSON object a line, appended to File.
type AuditConfig struct {
	// File is the audit log; "" keeps none.
	File string
	// MaxBytes rotates the file once it would grow past this size: File
	// becomes File.1, File.1 becomes File.2 and so on. 0 never rotates.
	MaxBytes int64
	// Keep is how many rotated files are kept (File.1 … File.Keep); older
	// ones are removed. At least 1 when MaxBytes is set.
	Keep int
}

// Events of the audit log.
const (
	auditAuthFailed = "authentication-failed"
	auditDenied     = "denied"
	auditAdmin      = "admin"
)

// auditEntry is one line of the audit log.
type auditEntry struct {
	Time       time.Time `json:"time"`
	Node       string    `json:"node"`
	Event      string    `json:"event"`
	Identity   string    `json:"identity,omitempty"`
	Source     string    `json:"source,omitempty"`
	Procedure  string    `json:"procedure"`
	Target     string    `json:"target,omitempty"`
	Permission string    `json:"permission,omitempty"`
	Outcome    string    `json:"outcome"`
	Detail     string    `json:"detail,omitempty"`
}

// auditLog appends entries to the audit file, rotating it by size. A nil
// *auditLog records nothing.
type auditLog struct {
	cfg  AuditConfig
	node string
	log  *slog.Logger

	mu   sync.Mutex
	f    *os.File
	size int64
}

func openAuditLog(cfg AuditConfig, node string, log *slog.Logger) (*auditLog, error) {
	if cfg.File == "" {
		return nil, nil
	}
	a := &auditLog{cfg: cfg, node: node, log: log}
	if err := a.open(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *auditLog) open() error {
	f, err := os.OpenFile(a.cfg.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	a.f, a.size = f, st.Size()
	return nil
}

// record appends e. A write that fails is logged at ERROR: the call it
// describes has already been decided.
func (a *auditLog) record(e auditEntry) {
	if a == nil {
		return
	}
	e.Time, e.Node = time.Now().UTC(), a.node
	line, _ := json.Marshal(e)
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return
	}
	if a.cfg.MaxBytes > 0 && a.size > 0 && a.size+int64(len(line)) > a.cfg.MaxBytes {
		if err := a.rotate(); err != nil {
			a.log.Error("audit log rotation failed; appending to the current file", "err", err)
		}
	}
	if a.f == nil {
		return
	}
	n, err := a.f.Write(line)
	a.size += int64(n)
	if err != nil {
		a.log.Error("audit log write failed", "err", err, "entry", string(line))
	}
}

// rotate shifts File.k to File.k+1 (dropping File.Keep), File to File.1,
// and opens a new File.
func (a *auditLog) rotate() error {
	keep := max(a.cfg.Keep, 1)
	if err := a.f.Close(); err != nil {
		return err
	}
	a.f = nil
	os.Remove(fmt.Sprintf("%s.%d", a.cfg.File, keep))
	for k := keep - 1; k >= 1; k-- {
		os.Rename(fmt.Sprintf("%s.%d", a.cfg.File, k), fmt.Sprintf("%s.%d", a.cfg.File, k+1))
	}
	rerr := os.Rename(a.cfg.File, a.cfg.File+".1")
	if err := a.open(); err != nil {
		return err
	}
	return rerr
}

// close closes the file.
func (a *auditLog) close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}
