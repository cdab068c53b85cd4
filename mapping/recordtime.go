package mapping

import (
	"math"
	"time"
)

// Times a time.Time made by time.Unix(0, n) can hold: int64 nanoseconds
// since the epoch, 1677-09-21 to 2262-04-11.
var (
	minNanoTime = time.Unix(0, math.MinInt64)
	maxNanoTime = time.Unix(0, math.MaxInt64)
)

// inverse15625 is the inverse of 15625 modulo 2^64 (1e6 = 2^6 * 15625).
var inverse15625 = func() uint64 {
	// Newton's iteration doubles the correct low bits each step.
	x := uint64(15625)
	for range 6 {
		x *= 2 - 15625*x
	}
	return x
}()

// RecordTime is the timestamp of a record franz-go decoded, whatever it
// is. A Kafka timestamp is an int64 of milliseconds since the epoch, and
// franz-go's consumer makes its time.Time with time.Unix(0, millis*1e6),
// which overflows int64 nanoseconds for a timestamp before 1677-09-21 or
// after 2262-04-11 (a producer's 0001-01-01 or 9999-12-31): the record
// read as another time, in the table and in the audit's re-read of the
// log alike. The product wrapped modulo 2^64, and 1e6 = 2^6 * 15625 with
// 15625 odd, so the milliseconds are known modulo 2^58, which holds every
// timestamp within 4.5 million years of 1970 (the one taken, signed). A
// time outside the nanosecond range (one this function already made) and
// one whose nanoseconds are not a multiple of 64 (no product of 1e6,
// wrapped or not) are returned as they are: franz-go makes neither. On a
// time of whole milliseconds within the range it is the identity.
func RecordTime(t time.Time) time.Time {
	if t.Before(minNanoTime) || t.After(maxNanoTime) {
		return t
	}
	n := t.UnixNano()
	if n&63 != 0 {
		// Not a product of 1e6, wrapped or not.
		return t
	}
	m := (uint64(n) >> 6) * inverse15625 & (1<<58 - 1)
	ms := int64(m<<6) >> 6 // sign-extend from 58 bits
	if ms*1e6 == n && n%1e6 == 0 && n/1e6 == ms {
		return t // no overflow: the time franz-go made is the record's
	}
	return time.UnixMilli(ms).In(t.Location())
}
