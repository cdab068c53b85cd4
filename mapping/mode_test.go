package mapping

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
)

// TestModeOf: a table's mode comes from floe.mode, a legacy state table's
// from floe.fold=latest; a mode or fold this floe does not know is an
// error, never read as another mode.
func TestModeOf(t *testing.T) {
	for _, c := range []struct {
		props iceberg.Properties
		want  Mode
		bad   bool
	}{
		{props: iceberg.Properties{}, want: ModeAppend},
		{props: iceberg.Properties{PropMode: "append"}, want: ModeAppend},
		{props: iceberg.Properties{PropMode: "upsert"}, want: ModeUpsert},
		{props: iceberg.Properties{PropFold: "latest"}, want: ModeFold},
		{props: iceberg.Properties{PropFold: "latest", PropMode: "fold"}, want: ModeFold},
		{props: iceberg.Properties{PropMode: "merge"}, bad: true},
		{props: iceberg.Properties{PropFold: "sum"}, bad: true},
		{props: iceberg.Properties{PropMode: "fold"}, bad: true},
		{props: iceberg.Properties{PropFold: "latest", PropMode: "upsert"}, bad: true},
	} {
		got, err := ModeOf(c.props)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%v: mode %q, err %v", c.props, got, err)
		}
	}
}

// TestUpsertKeyText: the key's text form round-trips and rejects what is
// not one.
func TestUpsertKeyText(t *testing.T) {
	for _, k := range []UpsertKey{
		{Source: KeyFromKafkaKey, Columns: []string{ColKey}},
		{Source: KeyFromKeyFields, Columns: []string{"id"}},
		{Source: KeyFromValue, Columns: []string{"tenant", "id"}},
	} {
		back, err := ParseUpsertKey(k.String())
		if err != nil || !back.Equal(k) {
			t.Errorf("%s: %+v, %v", k, back, err)
		}
	}
	if k, err := ParseUpsertKey("key"); err != nil || k.Source != KeyFromKeyFields || len(k.Columns) != 0 {
		t.Errorf("a key of fields not named yet: %+v, %v", k, err)
	}
	for _, bad := range []string{"", "kafka", "columns:", "columns:a,,b", "value:a"} {
		if _, err := ParseUpsertKey(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestWinner: within a partition the highest offset wins whatever the
// timestamps; across partitions each partition's latest record competes
// by timestamp, then partition number.
func TestWinner(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	p0, p1 := TopicPartition{Topic: "t", Partition: 0}, TopicPartition{Topic: "t", Partition: 1}
	vs := []KeyRecord{
		{Partition: p0, Offset: 1, Timestamp: at(50)},
		{Partition: p0, Offset: 2, Timestamp: at(10)},
		{Partition: p1, Offset: 7, Timestamp: at(30)},
	}
	// p0's latest (offset 2, t=10) loses to p1's (t=30), although p0's
	// offset 1 is later than both in time.
	if w := Winner(vs); w != 2 {
		t.Fatalf("winner %d, want 2", w)
	}
	vs[2].Timestamp = at(10)
	if w := Winner(vs); w != 2 {
		t.Fatalf("equal timestamps: winner %d, want the higher partition's", w)
	}
	if w := Winner(vs[:2]); w != 1 {
		t.Fatalf("one partition: winner %d, want the highest offset", w)
	}
	if Winner(nil) != -1 {
		t.Fatal("a winner of nothing")
	}
}

// TestCheckKeyColumnAdvice (from a new-user run): a struct Kafka key of a
// fold (replay --fold latest --key json) was told to use --id-columns,
// which a fold refuses; it is told to key by the key's fields instead.
func TestCheckKeyColumnAdvice(t *testing.T) {
	st := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 2, Name: "id", Type: iceberg.PrimitiveTypes.Int64}}}
	for name, want := range map[string]string{
		ColKey:    "--mode upsert --key json|registry instead of --fold latest",
		"payload": "--envelope debezium",
		"id":      "name its fields with --id-columns",
	} {
		err := CheckKeyColumn(iceberg.NestedField{ID: 1, Name: name, Type: st}, KeyFromValue)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", name, err, want)
		}
	}
}

// TestCheckKeyColumnFloatAdvice (from a new-user run): a floating-point
// field of a key keyed by its fields was told to key by another column,
// which only --id-columns can choose; it is told the choices it has.
func TestCheckKeyColumnFloatAdvice(t *testing.T) {
	f := iceberg.NestedField{ID: 1, Name: "price", Type: iceberg.PrimitiveTypes.Float64}
	for source, want := range map[KeySource]string{
		KeyFromKeyFields: "key by the key's text with --key string, or by value columns with --id-columns",
		KeyFromValue:     "key by other columns with --id-columns",
	} {
		err := CheckKeyColumn(f, source)
		if err == nil || !strings.Contains(err.Error(), `key column "price" is a double: floating-point values cannot identify rows`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want %q", source, err, want)
		}
	}
}
