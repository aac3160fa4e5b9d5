// Package keyslot computes a key's Redis Cluster hash slot, for the Redis
// transports that route reads to a slot's nodes.
//
// What it is not: a cluster client. It knows nothing of which node holds a
// slot.
package keyslot

import "strings"

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Of returns the hash slot of key, as Redis Cluster computes it: CRC16
// (XMODEM) of the key, or of its hash tag (the part between the first "{"
// and the next "}", when not empty), modulo Slots.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// Group groups keys by hash slot, as a multi-key command must be split
// on a cluster. order holds each slot once, in the order of its first key
// in keys. bySlot holds each slot's key positions in keys, in order.
func Group(keys []string) (order []int, bySlot map[int][]int) {
	bySlot = map[int][]int{}
	for i, k := range keys {
		s := Of(k)
		if _, ok := bySlot[s]; !ok {
			order = append(order, s)
		}
		bySlot[s] = append(bySlot[s], i)
	}
	return order, bySlot
}

// table is CRC-16/XMODEM's table, one entry per byte value.
var table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
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

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ table[byte(crc>>8)^s[i]]
	}
	return crc
}
