package redisgrant

// KeySlot is keySlot, for tests.
var KeySlot = keySlot
