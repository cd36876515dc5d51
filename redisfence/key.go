package redisfence

import (
	"strconv"
	"strings"
	"sync"
)

// watermarkInfix separates the hash tag from the protected key in a
// watermark key.
const watermarkInfix = ":fencing-token:"

// WatermarkKey returns the key that holds the watermark of key: the highest
// token accepted for it, as a decimal string. It is
//
//	"{" + T + "}" + ":fencing-token:" + key
//
// where T, the hash tag, is chosen so that the watermark key lands in the
// same Redis Cluster hash slot as key:
//
//   - key has a hash tag (a "{...}" with at least one byte between the first
//     "{" and the first "}" after it; Redis hashes only those bytes): T is
//     that tag. "{user:1}:cart" → "{user:1}:fencing-token:{user:1}:cart".
//   - key has no hash tag, is not empty and contains no "}": Redis hashes the
//     whole key, so T is the key itself. "orders" →
//     "{orders}:fencing-token:orders".
//   - key has no hash tag but contains "}" (say "a}b", or "x{}y{z}", whose
//     first braces are empty), or is empty: the key cannot serve as a tag, so
//     T is "fencing-slot-N" for the smallest N whose hash slot equals the
//     key's.
//
// Because T never contains "}", the tag of the watermark key is exactly T,
// so both keys hash to one slot and a script may declare both in KEYS on a
// Redis Cluster. Because the whole key follows the fixed infix, two keys
// never share a watermark key.
//
// The scheme is part of the stored format: a guard that computed another
// key would not see the watermarks already stored and would accept stale
// tokens. It does not change between versions.
func WatermarkKey(key string) string {
	var tag string
	switch t, ok := hashTag(key); {
	case ok:
		tag = t
	case key != "" && !strings.Contains(key, "}"):
		tag = key
	default:
		tag = slotTag(keySlot(key))
	}
	return "{" + tag + "}" + watermarkInfix + key
}

// numSlots is the number of hash slots of a Redis Cluster.
const numSlots = 16384

// hashTag returns the hash tag of key as Redis Cluster defines it: the bytes
// between the first "{" and the first "}" after it, when there is at least
// one.
func hashTag(key string) (string, bool) {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return "", false
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return "", false
	}
	return key[s+1 : s+1+e], true
}

// keySlot returns the hash slot of key, as CLUSTER KEYSLOT computes it.
func keySlot(key string) int {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return int(crc16(key)) % numSlots
}

// crc16 is the CRC-16/XMODEM checksum Redis Cluster hashes keys with
// (polynomial 0x1021, initial value 0).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slotTagPrefix starts the tags of keys that cannot be their own tag.
const slotTagPrefix = "fencing-slot-"

// slotTags maps each hash slot to the smallest N for which
// slotTagPrefix+N hashes to it. It is built on first use (about 170,000
// checksums of short strings, a few milliseconds) and only for keys that
// have no hash tag and contain "}", or are empty.
var slotTags = sync.OnceValue(func() *[numSlots]uint32 {
	var tags [numSlots]uint32
	var found [numSlots]bool
	left := numSlots
	for n := uint32(0); left > 0; n++ {
		s := keySlot(slotTagPrefix + strconv.FormatUint(uint64(n), 10))
		if !found[s] {
			found[s], tags[s] = true, n
			left--
		}
	}
	return &tags
})

// slotTag returns a hash tag, without braces, that hashes to slot.
func slotTag(slot int) string {
	return slotTagPrefix + strconv.FormatUint(uint64(slotTags()[slot]), 10)
}
