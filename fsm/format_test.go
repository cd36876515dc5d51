package fsm_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fenced-dev/fenced/fsm"
	statev1 "github.com/fenced-dev/fenced/proto/fenced/state/v1"
)

// Every entry carries this build's format version; an entry written
// before versions (none) decodes as version 1.
func TestCodec_WritesTheFormatVersion(t *testing.T) {
	cmd := &statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 3}}}
	b, err := fsm.Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.GetFormatVersion() != 0 {
		t.Fatal("Encode changed the caller's command")
	}
	if len(b) != fsm.EncodedSize(cmd) {
		t.Fatalf("encoded %d bytes, EncodedSize says %d", len(b), fsm.EncodedSize(cmd))
	}
	got, err := fsm.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.GetFormatVersion() != fsm.FormatVersion || got.GetNewLeader().GetTerm() != 3 {
		t.Fatalf("decoded %v, want term 3 in format %d", got, fsm.FormatVersion)
	}
	old, _ := proto.Marshal(cmd) // as a build before versions wrote it
	if _, err := fsm.Decode(old); err != nil {
		t.Fatalf("an entry without a version: %v", err)
	}
}

// A command, or a command inside a batch, of a version above this build's
// is refused, never decoded into something to apply.
func TestCodec_RefusesAFutureVersion(t *testing.T) {
	future := fsm.FormatVersion + 1
	nl := &statev1.Command{Op: &statev1.Command_NewLeader{NewLeader: &statev1.NewLeader{Term: 3}}}
	outer := &statev1.Command{FormatVersion: future, Op: nl.Op}
	inner := &statev1.Command{Op: &statev1.Command_Batch{Batch: &statev1.Batch{Commands: []*statev1.Command{nl, {FormatVersion: future, Op: nl.Op}}}}}
	for name, c := range map[string]*statev1.Command{"outer": outer, "in a batch": inner} {
		b, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fsm.Decode(b)
		if !errors.Is(err, fsm.ErrFormatVersion) || !strings.Contains(err.Error(), "format version 2") || !strings.Contains(err.Error(), "Upgrades") {
			t.Errorf("%s: Decode = %v, want ErrFormatVersion naming version 2 and the upgrade rule", name, err)
		}
	}
}

// A snapshot carries the format version; one of a future version is
// refused and leaves the machine empty.
func TestSnapshot_RefusesAFutureVersion(t *testing.T) {
	m := goldenState(t)
	var st statev1.State
	if err := proto.Unmarshal(mustSnapshot(t, m), &st); err != nil {
		t.Fatal(err)
	}
	if st.GetFormatVersion() != fsm.FormatVersion {
		t.Fatalf("snapshot format %d, want %d", st.GetFormatVersion(), fsm.FormatVersion)
	}
	st.FormatVersion = fsm.FormatVersion + 1
	b, _ := proto.Marshal(&st)
	fresh := fsm.New(nil)
	if err := fresh.Restore(b); !errors.Is(err, fsm.ErrFormatVersion) {
		t.Fatalf("Restore(future) = %v, want ErrFormatVersion", err)
	}
	if fresh.Issuer() != "" || fresh.LastToken() != 0 {
		t.Fatal("a refused snapshot left state behind")
	}
}
