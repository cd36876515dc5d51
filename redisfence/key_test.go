package redisfence_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fenced-dev/fenced/redisfence"
)

func TestCRC16(t *testing.T) {
	// The check value of the Redis Cluster specification.
	if got := redisfence.CRC16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789)=%#x, want 0x31c3", got)
	}
}

func TestWatermarkKey(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"orders", "{orders}:fencing-token:orders"},
		{"{user:1}:cart", "{user:1}:fencing-token:{user:1}:cart"},
		{"a{b}c{d}", "{b}:fencing-token:a{b}c{d}"},
		{"{orders}", "{orders}:fencing-token:{orders}"},
		{"a{b", "{a{b}:fencing-token:a{b"},
		// No hash tag but a "}", or empty: the tag is a stand-in with the
		// key's slot. These values are part of the stored format: a change
		// would lose every watermark stored under the old keys.
		{"a}b", "{fencing-slot-1170}:fencing-token:a}b"},
		{"x{}y{z}", "{fencing-slot-1044}:fencing-token:x{}y{z}"},
		{"", "{fencing-slot-12954}:fencing-token:"},
	} {
		if got := redisfence.WatermarkKey(tt.key); got != tt.want {
			t.Errorf("WatermarkKey(%q)=%q, want %q", tt.key, got, tt.want)
		}
	}
	for _, tt := range []struct {
		slot int
		want string
	}{
		{0, "fencing-slot-12954"},
		{1, "fencing-slot-3651"},
		{12739, "fencing-slot-2313"},
		{16383, "fencing-slot-16997"},
	} {
		if got := redisfence.SlotTag(tt.slot); got != tt.want {
			t.Errorf("SlotTag(%d)=%q, want %q", tt.slot, got, tt.want)
		}
	}
}

func TestSlotTag_EverySlot(t *testing.T) {
	for slot := 0; slot < 16384; slot++ {
		tag := redisfence.SlotTag(slot)
		if strings.ContainsAny(tag, "{}") || redisfence.KeySlot(tag) != slot {
			t.Fatalf("SlotTag(%d)=%q hashes to slot %d", slot, tag, redisfence.KeySlot(tag))
		}
	}
}

// shapes are keys of every shape the hash tag rules distinguish.
var shapes = []string{
	"orders", "{user:1}:cart", "{user:1}", "a{b}c{d}", "{orders}", "a{b", "a}b", "}{", "{}", "{}x{y}",
	"x{}y{z}", "{", "}", "", "ünïcødé", "with space", "nul\x00byte", "{{a}}", "a{{b}",
}

// keyShapes returns shapes and random keys made of "a", "b", "{", "}", ":".
func keyShapes() []string {
	keys := append([]string{}, shapes...)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab{}:"
	for i := 0; i < 500; i++ {
		b := make([]byte, rng.IntN(8))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	return keys
}

// TestWatermarkKey_SameSlot asks a real Redis Cluster node (CLUSTER
// KEYSLOT) for the slots of keys of every shape and of their watermark keys.
func TestWatermarkKey_SameSlot(t *testing.T) {
	rdb := newClusterClient(t)
	for _, key := range keyShapes() {
		w := redisfence.WatermarkKey(key)
		ks, err := rdb.ClusterKeySlot(ctx(t), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		ws, err := rdb.ClusterKeySlot(ctx(t), w).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ks != ws {
			t.Errorf("key %q is in slot %d, its watermark key %q in slot %d", key, ks, w, ws)
		}
		if got := redisfence.KeySlot(key); int64(got) != ks {
			t.Errorf("KeySlot(%q)=%d, Redis says %d", key, got, ks)
		}
	}
}

func TestWatermarkKey_Distinct(t *testing.T) {
	seen := map[string]string{}
	for _, key := range keyShapes() {
		w := redisfence.WatermarkKey(key)
		if other, ok := seen[w]; ok && other != key {
			t.Fatalf("keys %q and %q share the watermark key %q", key, other, w)
		}
		seen[w] = key
	}
}

// TestGuard_ClusterKeyShapes writes keys of every shape through a
// ClusterClient: the cluster node refuses a script whose declared keys are
// in different slots, so this fails for a watermark key in another slot.
func TestGuard_ClusterKeyShapes(t *testing.T) {
	rdb := newClusterClient(t)
	g := redisfence.New(rdb)
	prefix := uniqueKey(t, "")
	for _, shape := range shapes {
		key := shape + prefix
		if err := g.Set(ctx(t), key, 3, "v", 0); err != nil {
			t.Fatalf("Set(%q): %v", key, err)
		}
		wantStale(t, g.Set(ctx(t), key, 2, "stale", 0), 2, 3)
		if _, err := g.Del(ctx(t), key, 4); err != nil {
			t.Fatalf("Del(%q): %v", key, err)
		}
		wantMark(t, g, key, 4)
	}
}

// TestCluster_RejectsCrossSlot shows that the cluster node used above does
// check slots: a watermark key made by a plain suffix lands elsewhere.
func TestCluster_RejectsCrossSlot(t *testing.T) {
	rdb := newClusterClient(t)
	err := rdb.Eval(ctx(t), `return 1`, []string{"orders", "orders:fencing-token"}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EVAL with keys in two slots=%v, want CROSSSLOT", err)
	}
}
