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
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^key[k]]
	}
	return int(crc) % slotCount
}

// crc16Table is CRC16 (XMODEM, polynomial 0x1021) of every byte value,
// for keySlot's byte-at-a-time loop.
var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

// sameSlot returns an error wrapping ErrCrossSlot unless every key is in
// the first key's hash slot.
func sameSlot(keys ...string) error {
	a := keySlot(keys[0])
	for _, k := range keys[1:] {
		if b := keySlot(k); a != b {
			return fmt.Errorf("%w: %q is in slot %d, %q in slot %d; give them one hash tag", ErrCrossSlot, keys[0], a, k, b)
		}
	}
	return nil
}
