package mapping

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

func TestParsePartitionBy(t *testing.T) {
	for in, want := range map[string]string{
		"hour(kafka_timestamp)":                   "hour(kafka_timestamp)",
		" DAY( placed_at ) , identity(customer)":  "day(placed_at), identity(customer)",
		"bucket(16, id),truncate(4,name)":         "bucket(16, id), truncate(4, name)",
		"year(a), month(b), day(order.placed_at)": "year(a), month(b), day(order.placed_at)",
		"none": "none",
		"NONE": "none",
		"identity(kafka_partition), bucket(8, kafka_key)": "identity(kafka_partition), bucket(8, kafka_key)",
	} {
		p, err := ParsePartitionBy(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("%q: %q, want %q", in, p, want)
		}
		again, err := ParsePartitionBy(p.String())
		if err != nil || !again.Equal(p) {
			t.Errorf("%q does not read back: %v %v", p, again, err)
		}
	}
	p, _ := ParsePartitionBy("identity(a), bucket(16, b), truncate(4, c), year(d), hour(e.f)")
	var names []string
	for _, f := range p.Fields {
		names = append(names, f.Name())
	}
	if got := strings.Join(names, " "); got != "a b_bucket_16 c_trunc_4 d_year e_f_hour" {
		t.Fatalf("partition field names %s", got)
	}
	p, _ = ParsePartitionBy("bucket(16, id)")
	if got := p.Fields[0]; got != (PartitionField{Transform: TransformBucket, Param: 16, Column: "id"}) || !got.IcebergTransform().Equals(iceberg.BucketTransform{NumBuckets: 16}) {
		t.Fatalf("bucket(16, id) is %+v", got)
	}
}

// TestParsePartitionByErrors: every mistake names the part at fault and
// what would be right.
func TestParsePartitionByErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "empty; want TRANSFORM(COLUMN)",
		"hourly(kafka_timestamp)": `hourly(kafka_timestamp): unknown transform "hourly"; want one of identity(COLUMN), bucket(N, COLUMN)`,
		"hours(ts)":               `did you mean hour`,
		"bucket(id)":              "bucket(id): bucket takes the number of buckets and a column: bucket(N, COLUMN), e.g. bucket(16, id)",
		"bucket(id, 16)":          "the number of buckets comes first: bucket(16, id)",
		"bucket(0, id)":           "must be 1 to 2147483647, not 0",
		"truncate(x, name)":       `the width "x" is not a whole number`,
		"customer":                "customer: want TRANSFORM(COLUMN); to partition by the column's own values write identity(customer)",
		"day(a, b)":               "day takes one column: day(COLUMN)",
		"day()":                   "no column: day(COLUMN)",
		"day(a..b)":               "has an empty part",
		"day(a),,hour(b)":         "a field is empty",
		"day(a":                   "a ( is not closed",
		"day(a))":                 "closes nothing",
		"day(a) x":                "with nothing after the )",
		"day(a), day(a)":          "given twice",
		"hour(ts), day(ts)":       "hour(ts) already partitions ts by time",
	} {
		_, err := ParsePartitionBy(in)
		var pe *PartitionByError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), `partition spec "`+in+`"`) {
			t.Errorf("%q: %v; want a *PartitionByError containing %q", in, err, want)
		}
	}
}

func TestCheckPartitionBy(t *testing.T) {
	typed := Layout{Value: ValueJSON}
	if err := typed.Normalize(); err != nil {
		t.Fatal(err)
	}
	values := &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 1, Name: "placed_at", Type: iceberg.PrimitiveTypes.TimestampTz},
		{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String},
		{ID: 3, Name: "amount", Type: iceberg.PrimitiveTypes.Float64},
		{ID: 4, Name: "order", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 5, Name: "day", Type: iceberg.PrimitiveTypes.Date}}}},
		{ID: 6, Name: "items", Type: &iceberg.ListType{ElementID: 7, Element: &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 8, Name: "sku", Type: iceberg.PrimitiveTypes.String}}}}},
	}}
	withValues := typed.WriterSchema(nil, values)
	for _, c := range []struct {
		layout Layout
		schema *iceberg.Schema
		spec   string
		want   string // "" : fine
	}{
		{RawLayout, RawLayout.Schema(), "hour(kafka_timestamp), identity(kafka_partition), bucket(16, kafka_key), truncate(4, kafka_topic)", ""},
		{RawLayout, RawLayout.Schema(), "day(placed_at)", "floe writes no column placed_at into a table of raw values; its columns are kafka_topic"},
		{RawLayout, RawLayout.Schema(), "hour(kafka_offset)", "column kafka_offset is a long, which hour does not take (it takes timestamp or timestamptz)"},
		{RawLayout, RawLayout.Schema(), "identity(kafka_headers)", "Iceberg partitions only by primitive columns"},
		{RawLayout, RawLayout.Schema(), "identity(kafka_headers.key)", "not by what lists or maps hold"},
		{RawLayout, RawLayout.Schema(), "day(kafka_topic.x)", "is a string and has no field x"},
		{typed, typed.Schema(), "day(placed_at), bucket(16, order.id)", ""}, // value columns wait for their records
		{typed, typed.Schema(), "day(Kafka_Timestamp)", "no value column can be named Kafka_Timestamp"},
		{typed, withValues, "day(placed_at), truncate(2, name), day(order.day)", ""},
		{typed, withValues, "bucket(4, amount)", "column amount is a double, which bucket does not take"},
		{typed, withValues, "identity(items.sku)", "items is a list"},
		{typed, withValues, "identity(order)", "a struct's fields are written as a dotted path, e.g. order.FIELD"},
		// A list is no struct: no path names its elements (from a review).
		{typed, withValues, "identity(kafka_headers)", "not by lists or maps or what they hold"},
		// A typo of a column the table has is refused, where it waited for
		// a column of that name and dropped the spec's other fields (from a
		// new-user run).
		{typed, withValues, "day(placd_at)", "the table has no column placd_at; did you mean placed_at?"},
		{typed, withValues, "day(placed_at), truncate(2, Nmae)", "did you mean name?"},
		{typed, withValues, "day(shipped_on)", ""},
	} {
		p, err := ParsePartitionBy(c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		err = c.layout.CheckPartitionBy(p, c.schema)
		var pe *PartitionByError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (%s values): %v", c.spec, c.layout.Value, err)
		case c.want != "" && (!errors.As(err, &pe) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s (%s values): %v; want a *PartitionByError containing %q", c.spec, c.layout.Value, err, c.want)
		}
	}
}
