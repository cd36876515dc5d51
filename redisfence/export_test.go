package redisfence

// Hooks for the external tests.
var (
	KeySlot = keySlot
	SlotTag = slotTag
	CRC16   = crc16
)
