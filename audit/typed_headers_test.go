package audit_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestTypedContentTellsHeaderKeysApart: a typed table's rows are
// digested column by column through Arrow's ValueStr, which for the
// kafka_headers list is json.Marshal, and json.Marshal turns every byte
// that is not UTF-8 into U+FFFD. Header keys are stored as the record's
// bytes, unchecked, so two logs whose records differ only in such a byte
// of a header key ("\xff" against "\xfe") digest alike: --verify-content
// calls the table complete against a log it does not hold. (A raw table's
// content level digests header keys as bytes and finds it.) From a
// review.
func TestTypedContentTellsHeaderKeysApart(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	rec := func(hkey string) []*kgo.Record {
		return []*kgo.Record{{Topic: "hk", Timestamp: at, Value: []byte(`{"id":1}`),
			Headers: []kgo.RecordHeader{{Key: hkey, Value: []byte("v")}}}}
	}
	e := newEnv(t)
	e.Topic("hk", 1, nil)
	tbl, dlq := e.TypedTable("lake.hk", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(rec("trace\xff"))
	e.sink(tbl, connector.Config{Topic: "hk", DeadLetters: dlq})
	if rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}); !rep.Complete() {
		t.Fatalf("against its own log: findings %+v", rep.Findings)
	}
	// Against another cluster's log (its topic ID differs, a finding of
	// its own), the content level still compares every record.
	mismatch := func(hkey string) (bool, *audit.Report) {
		other := newEnv(t)
		other.Topic("hk", 1, nil)
		other.Produce(rec(hkey))
		rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: other.Broker(), VerifyContent: true})
		for _, f := range rep.Findings {
			if f.Kind == audit.KindContentMismatch {
				return true, rep
			}
		}
		return false, rep
	}
	if found, rep := mismatch("traceY"); !found {
		t.Fatalf("control: header key traceY against trace\\xff: no content mismatch, findings %+v", rep.Findings)
	}
	if found, rep := mismatch("trace\xfe"); !found {
		t.Errorf("a log whose record has header key %q where the table holds %q: no content mismatch (%d rows verified; findings %+v)",
			"trace\xfe", "trace\xff", rep.Partitions[0].Content.Verified, rep.Findings)
	}
}
