package redisgrant

import (
	"fmt"
	"strings"
)

// slotCount is the number of hash slots of Redis Cluster.
const slotCount = 16384

// keySlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag (the bytes between the first '{' and the next '}', when
// not empty) or of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % slotCount
}

// sameSlot returns an error wrapping ErrCrossSlot unless every key is in
// the first key's hash slot.
func sameSlot(keys ...string) error {
	for _, k := range keys[1:] {
		if a, b := keySlot(keys[0]), keySlot(k); a != b {
			return fmt.Errorf("%w: %q is in slot %d, %q in slot %d; give them one hash tag", ErrCrossSlot, keys[0], a, k, b)
		}
	}
	return nil
}
