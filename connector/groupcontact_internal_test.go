package connector

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupContactCountsWhatWasWritten (from a review): franz-go reports
// a request's end (OnBrokerE2E) once per request, with the figures of its
// write, in four ways (franz-go v1.22.3's broker.go): its answer read; its
// read failed; queued behind a failed read, with WriteErr set though
// OnBrokerWrite had reported it written; or its write failed or never
// began (a throttle wait ended), which OnBrokerWrite did not count. The
// third used to be skipped: the request stayed awaited for the rest of
// the session, the silence at zero, and a cut-off member was never
// reported unconfirmed. Each way must uncount exactly the requests
// counted, and an answer awaited past overdue must not hold the silence
// at zero.
func TestGroupContactCountsWhatWasWritten(t *testing.T) {
	meta := kgo.BrokerMetadata{NodeID: 1}
	hb := int16(kmsg.ConsumerGroupHeartbeat)
	dead := errors.New("the broker connection has died and the request will be retried on a new connection")
	// answer writes a heartbeat and reads its answer: the next write
	// confirms it.
	answer := func(c *groupContact, bytes int) {
		c.OnBrokerWrite(meta, hb, bytes, time.Microsecond, time.Microsecond, nil)
		c.OnBrokerE2E(meta, hb, kgo.BrokerE2E{BytesWritten: bytes, WriteWait: time.Microsecond, TimeToWrite: time.Microsecond})
	}
	newContact := func() *groupContact {
		c := &groupContact{overdue: time.Hour}
		answer(c, 10)
		answer(c, 11) // its write confirms the first answer
		return c
	}
	later := func() time.Time { return time.Now().Add(time.Minute) }

	t.Run("queued behind a dead read", func(t *testing.T) {
		c := newContact()
		c.OnBrokerWrite(meta, hb, 12, 2*time.Microsecond, 3*time.Microsecond, nil)
		if got := c.silence(later()); got != 0 {
			t.Fatalf("silence %s while a heartbeat is awaited", got)
		}
		c.OnBrokerE2E(meta, hb, kgo.BrokerE2E{BytesWritten: 12, WriteWait: 2 * time.Microsecond, TimeToWrite: 3 * time.Microsecond, WriteErr: dead})
		if got := c.silence(later()); got < time.Minute {
			t.Fatalf("silence %s a minute after the last answer, the heartbeat written after it ended with the connection's death: it is still counted as awaited", got)
		}
	})
	t.Run("failed write", func(t *testing.T) {
		c := newContact()
		// An awaited heartbeat, then one whose write failed with the same
		// size: ending the failed one must not uncount the awaited one.
		c.OnBrokerWrite(meta, hb, 12, 2*time.Microsecond, 3*time.Microsecond, nil)
		c.OnBrokerWrite(meta, hb, 12, 5*time.Microsecond, time.Microsecond, dead)
		c.OnBrokerE2E(meta, hb, kgo.BrokerE2E{BytesWritten: 12, WriteWait: 5 * time.Microsecond, TimeToWrite: time.Microsecond, WriteErr: dead})
		// A throttle wait that ended before any write: no OnBrokerWrite.
		c.OnBrokerE2E(meta, hb, kgo.BrokerE2E{WriteWait: time.Second, WriteErr: dead})
		if got := c.silence(later()); got != 0 {
			t.Fatalf("silence %s while a heartbeat is awaited: ends of requests never counted uncounted it", got)
		}
		c.OnBrokerE2E(meta, hb, kgo.BrokerE2E{BytesWritten: 12, WriteWait: 2 * time.Microsecond, TimeToWrite: 3 * time.Microsecond, ReadErr: dead})
		if got := c.silence(later()); got < time.Minute {
			t.Fatalf("silence %s once the awaited heartbeat's read failed", got)
		}
	})
	t.Run("overdue", func(t *testing.T) {
		c := newContact()
		c.overdue = 30 * time.Second
		// A heartbeat whose end is never reported the way its write was.
		c.OnBrokerWrite(meta, hb, 12, 2*time.Microsecond, 3*time.Microsecond, nil)
		if got := c.silence(time.Now().Add(20 * time.Second)); got != 0 {
			t.Fatalf("silence %s while a heartbeat written 20s ago is awaited (overdue after 30s)", got)
		}
		if got := c.silence(later()); got < time.Minute {
			t.Fatalf("silence %s with a heartbeat awaited for a minute, past overdue (30s)", got)
		}
	})
}
