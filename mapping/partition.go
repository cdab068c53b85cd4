package mapping

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/apache/iceberg-go"
)

// PropPartitionBy is the table property that records the partition spec
// floe was asked for (PartitionBy.String). The table's Iceberg spec holds
// the fields whose columns exist; a field on a value column that has not
// appeared yet is only here, and the commit that adds the column adds the
// field to the spec.
const PropPartitionBy = "floe.partition-by"

// Partition transforms, as --partition-by writes them.
const (
	TransformIdentity = "identity"
	TransformBucket   = "bucket"
	TransformTruncate = "truncate"
	TransformYear     = "year"
	TransformMonth    = "month"
	TransformDay      = "day"
	TransformHour     = "hour"
)

// transforms lists every transform with what it takes, for errors.
var transforms = []struct{ name, form, takes string }{
	{TransformIdentity, "identity(COLUMN)", "any primitive type"},
	{TransformBucket, "bucket(N, COLUMN)", "int, long, decimal, date, time, timestamp, timestamptz, string, uuid, fixed or binary"},
	{TransformTruncate, "truncate(W, COLUMN)", "int, long, decimal, string or binary"},
	{TransformYear, "year(COLUMN)", "date, timestamp or timestamptz"},
	{TransformMonth, "month(COLUMN)", "date, timestamp or timestamptz"},
	{TransformDay, "day(COLUMN)", "date, timestamp or timestamptz"},
	{TransformHour, "hour(COLUMN)", "timestamp or timestamptz"},
}

// PartitionBy is a requested Iceberg partition spec: fields in order, each
// an Iceberg transform of one column. No fields means unpartitioned
// ("none").
type PartitionBy struct {
	Fields []PartitionField
}

// PartitionField is one field of a PartitionBy.
type PartitionField struct {
	// Transform is one of the Transform* names.
	Transform string
	// Param is the number of buckets of bucket, the width of truncate; 0
	// for the others.
	Param int
	// Column is the source column: a top-level column, or a field nested in
	// struct columns as a dotted path (order.placed_at).
	Column string
}

// PartitionByError reports a partition spec floe cannot apply, naming the
// part at fault and what would be right.
type PartitionByError struct {
	// Spec is the spec as given, Part the field (or piece) at fault; empty
	// when the spec as a whole is.
	Spec, Part string
	// Problem says what is wrong and how to fix it.
	Problem string
	// Table is set when the problem is with a table's columns.
	Table string
	// TableSpec is set when Spec is the table's own (another engine set
	// it), not one asked for with --partition-by.
	TableSpec bool
}

func (e *PartitionByError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "partition spec %q", e.Spec)
	if e.Table != "" {
		fmt.Fprintf(&b, " on table %s", e.Table)
	}
	if e.Part != "" {
		fmt.Fprintf(&b, ": %s", e.Part)
	}
	fmt.Fprintf(&b, ": %s", e.Problem)
	return b.String()
}

// partitionNone is the spec text of an unpartitioned table.
const partitionNone = "none"

// ParsePartitionBy parses a comma-separated list of Iceberg transforms,
// each of one column: identity(COLUMN), bucket(N, COLUMN), truncate(W,
// COLUMN), year, month, day or hour(COLUMN); "none" asks for an
// unpartitioned table. Transform names ignore case; column names are taken
// as written (Iceberg's are case-sensitive). It checks the text only; which
// columns a table has, and their types, are checked by Layout.CheckPartitionBy.
// A mistake is a *PartitionByError.
func ParsePartitionBy(s string) (PartitionBy, error) {
	fail := func(part, problem string, args ...any) (PartitionBy, error) {
		return PartitionBy{}, &PartitionByError{Spec: s, Part: part, Problem: fmt.Sprintf(problem, args...)}
	}
	text := strings.TrimSpace(s)
	switch {
	case text == "":
		return fail("", "empty; want TRANSFORM(COLUMN)[, ...], e.g. hour(kafka_timestamp), or none for an unpartitioned table")
	case strings.EqualFold(text, partitionNone):
		return PartitionBy{}, nil
	}
	parts, err := splitTopLevel(text)
	if err != nil {
		return fail("", "%v", err)
	}
	var p PartitionBy
	for _, part := range parts {
		f, problem := parseField(part)
		if problem != "" {
			return fail(part, "%s", problem)
		}
		for _, g := range p.Fields {
			switch {
			case g == f:
				return fail(part, "given twice")
			case g.Column == f.Column && g.timeBased() && f.timeBased():
				return fail(part, "%s already partitions %s by time, and Iceberg refuses two time transforms of one column (the finer one implies the coarser); keep one", g, f.Column)
			}
		}
		p.Fields = append(p.Fields, f)
	}
	return p, nil
}

// splitTopLevel splits s at the commas outside parentheses, trimming each
// part.
func splitTopLevel(s string) ([]string, error) {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("a ) at character %d closes nothing", i+1)
			}
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("a ( is not closed")
	}
	parts = append(parts, strings.TrimSpace(s[start:]))
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("a field is empty (two commas in a row, or one at an end)")
		}
	}
	return parts, nil
}

// parseField parses one field; problem is empty when it is good.
func parseField(part string) (f PartitionField, problem string) {
	open := strings.IndexByte(part, '(')
	if open < 0 {
		return f, fmt.Sprintf("want TRANSFORM(COLUMN); to partition by the column's own values write identity(%s)", part)
	}
	if !strings.HasSuffix(part, ")") {
		return f, "want TRANSFORM(COLUMN) with nothing after the )"
	}
	name := strings.ToLower(strings.TrimSpace(part[:open]))
	args := strings.Split(part[open+1:len(part)-1], ",")
	for i := range args {
		args[i] = strings.TrimSpace(args[i])
	}
	i := slices.IndexFunc(transforms, func(t struct{ name, form, takes string }) bool { return t.name == name })
	if i < 0 {
		var names []string
		for _, t := range transforms {
			names = append(names, t.form)
		}
		msg := fmt.Sprintf("unknown transform %q; want one of %s", name, strings.Join(names, ", "))
		if singular := strings.TrimSuffix(name, "s"); singular != name && slices.ContainsFunc(transforms, func(t struct{ name, form, takes string }) bool { return t.name == singular }) {
			msg = fmt.Sprintf("unknown transform %q; did you mean %s (Iceberg's name; Spark's SQL writes %s)?", name, singular, name)
		}
		return f, msg
	}
	form := transforms[i].form
	f.Transform = name
	switch name {
	case TransformBucket, TransformTruncate:
		what := map[string]string{TransformBucket: "the number of buckets", TransformTruncate: "the width"}[name]
		if len(args) != 2 {
			return f, fmt.Sprintf("%s takes %s and a column: %s, e.g. %s(16, %s)", name, what, form, name, args[0])
		}
		n, err := strconv.Atoi(args[0])
		if err != nil {
			if _, err2 := strconv.Atoi(args[1]); err2 == nil {
				return f, fmt.Sprintf("%s comes first: %s(%s, %s)", what, name, args[1], args[0])
			}
			return f, fmt.Sprintf("%s %q is not a whole number: %s", what, args[0], form)
		}
		if n < 1 || n > 1<<31-1 {
			return f, fmt.Sprintf("%s must be 1 to 2147483647, not %d", what, n)
		}
		f.Param, f.Column = n, args[1]
	default:
		if len(args) != 1 {
			return f, fmt.Sprintf("%s takes one column: %s", name, form)
		}
		f.Column = args[0]
	}
	if f.Column == "" {
		return f, fmt.Sprintf("no column: %s", form)
	}
	for _, seg := range strings.Split(f.Column, ".") {
		if strings.TrimSpace(seg) == "" {
			return f, fmt.Sprintf("column %q has an empty part; nested fields are written as a dotted path, e.g. order.placed_at", f.Column)
		}
	}
	return f, ""
}

// String writes p as ParsePartitionBy reads it: "none" when it has no fields.
func (p PartitionBy) String() string {
	if len(p.Fields) == 0 {
		return partitionNone
	}
	out := make([]string, len(p.Fields))
	for i, f := range p.Fields {
		out[i] = f.String()
	}
	return strings.Join(out, ", ")
}

// Equal reports whether p and q ask for the same fields in the same order.
func (p PartitionBy) Equal(q PartitionBy) bool { return slices.Equal(p.Fields, q.Fields) }

func (f PartitionField) String() string {
	if f.Param != 0 {
		return fmt.Sprintf("%s(%d, %s)", f.Transform, f.Param, f.Column)
	}
	return fmt.Sprintf("%s(%s)", f.Transform, f.Column)
}

// Name is the name of the field in the table's partition spec: Iceberg's
// default (the column for identity, COLUMN_bucket_N, COLUMN_trunc_W,
// COLUMN_day, ...), with the dots of a nested column's path made
// underscores, since Iceberg refuses dots in partition field names.
func (f PartitionField) Name() string {
	col := strings.ReplaceAll(f.Column, ".", "_")
	switch f.Transform {
	case TransformIdentity:
		return col
	case TransformTruncate:
		return fmt.Sprintf("%s_trunc_%d", col, f.Param)
	case TransformBucket:
		return fmt.Sprintf("%s_bucket_%d", col, f.Param)
	}
	return col + "_" + f.Transform
}

// IcebergTransform is the field's Iceberg transform.
func (f PartitionField) IcebergTransform() iceberg.Transform {
	switch f.Transform {
	case TransformBucket:
		return iceberg.BucketTransform{NumBuckets: f.Param}
	case TransformTruncate:
		return iceberg.TruncateTransform{Width: f.Param}
	case TransformYear:
		return iceberg.YearTransform{}
	case TransformMonth:
		return iceberg.MonthTransform{}
	case TransformDay:
		return iceberg.DayTransform{}
	case TransformHour:
		return iceberg.HourTransform{}
	}
	return iceberg.IdentityTransform{}
}

// timeBased reports whether the transform cuts time (year to hour).
func (f PartitionField) timeBased() bool {
	switch f.Transform {
	case TransformYear, TransformMonth, TransformDay, TransformHour:
		return true
	}
	return false
}

// Source finds the field's column in schema s. ok is false when s has no
// such column (yet). A column Iceberg cannot partition by with the field's
// transform is an error saying why: one inside a list or a map, a list,
// map or struct itself, or a type the transform does not take.
func (f PartitionField) Source(s *iceberg.Schema) (col iceberg.NestedField, ok bool, err error) {
	fields := s.Fields()
	path := strings.Split(f.Column, ".")
	for i, name := range path {
		j := slices.IndexFunc(fields, func(g iceberg.NestedField) bool { return g.Name == name })
		if j < 0 {
			return col, false, nil
		}
		col = fields[j]
		if i == len(path)-1 {
			break
		}
		switch t := col.Type.(type) {
		case *iceberg.StructType:
			fields = t.FieldList
		case *iceberg.ListType, *iceberg.MapType:
			return col, false, fmt.Errorf("%s is a %s, and Iceberg partitions only by columns and fields of structs, not by what lists or maps hold", strings.Join(path[:i+1], "."), col.Type)
		default:
			return col, false, fmt.Errorf("%s is a %s and has no field %s", strings.Join(path[:i+1], "."), col.Type, path[i+1])
		}
	}
	switch col.Type.(type) {
	case iceberg.PrimitiveType:
	case *iceberg.StructType:
		return col, false, fmt.Errorf("column %s is a %s; Iceberg partitions only by primitive columns (a struct's fields are written as a dotted path, e.g. %s.FIELD)", f.Column, col.Type, f.Column)
	default:
		// A list's or map's elements cannot be named by a path (from a
		// review: the hint for structs was refused in turn).
		return col, false, fmt.Errorf("column %s is a %s; Iceberg partitions only by primitive columns and fields of structs, not by lists or maps or what they hold", f.Column, col.Type)
	}
	if !f.IcebergTransform().CanTransform(col.Type) {
		for _, t := range transforms {
			if t.name == f.Transform {
				return col, false, fmt.Errorf("column %s is a %s, which %s does not take (it takes %s)", f.Column, col.Type, f.Transform, t.takes)
			}
		}
	}
	return col, true, nil
}

// CheckPartitionBy reports, as a *PartitionByError, a field of p that a
// table of layout l with schema s cannot be partitioned by: a column of the
// wrong type, one that cannot be a partition source, or one the table can
// never have. In the raw layout every column exists from the start, so a
// column s lacks is an error. In typed layouts value columns (and the
// fields of a decoded key's struct) appear with the records that have
// them, so a column s lacks waits for them; only a name no value column can
// take (one of floe's own columns) is an error.
func (l Layout) CheckPartitionBy(p PartitionBy, s *iceberg.Schema) error {
	fail := func(f PartitionField, problem string) error {
		return &PartitionByError{Spec: p.String(), Part: f.String(), Problem: problem}
	}
	own := l.Schema()
	for _, f := range p.Fields {
		top, _, _ := strings.Cut(f.Column, ".")
		decodedKey := l.TypedKey() && top == ColKey
		if _, written := own.FindFieldByName(top); !l.Typed() && !written && !decodedKey {
			// Extra columns of a raw table are users' own: floe writes
			// nothing into them, so every row would land in the null
			// partition.
			return fail(f, fmt.Sprintf("floe writes no column %s into a table of %s values; its columns are %s", top, l.Value, columnNames(own)))
		}
		_, ok, err := f.Source(s)
		if err != nil {
			return fail(f, err.Error())
		}
		if ok {
			continue
		}
		reserved := slices.ContainsFunc(metadataColumns, func(m string) bool { return strings.EqualFold(m, top) })
		if !decodedKey && (!l.Typed() || reserved) {
			return fail(f, fmt.Sprintf("the table has no column %s, and no value column can be named %s (floe's own columns are reserved); its columns are %s", f.Column, top, columnNames(s)))
		}
		// A field may wait for a column a later record brings, but a name
		// one or two letters off a column the table has is a typo: taken
		// as a column to wait for, it would drop the spec's other fields.
		for _, c := range s.Fields() {
			if d := levenshtein.ComputeDistance(strings.ToLower(top), strings.ToLower(c.Name)); d > 0 && d <= 2 {
				return fail(f, fmt.Sprintf("the table has no column %s; did you mean %s? (a field waits for a column only a later record brings: name that column exactly)", top, c.Name))
			}
		}
	}
	return nil
}

// columnNames lists the top-level columns of s.
func columnNames(s *iceberg.Schema) string {
	names := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// PartitionFieldOf returns the field that asks for transform t of column;
// ok is false for a transform --partition-by cannot ask for (void, or one
// unknown to this Iceberg library).
func PartitionFieldOf(column string, t iceberg.Transform) (f PartitionField, ok bool) {
	f.Column = column
	switch t := t.(type) {
	case iceberg.IdentityTransform:
		f.Transform = TransformIdentity
	case iceberg.BucketTransform:
		f.Transform, f.Param = TransformBucket, t.NumBuckets
	case iceberg.TruncateTransform:
		f.Transform, f.Param = TransformTruncate, t.Width
	case iceberg.YearTransform:
		f.Transform = TransformYear
	case iceberg.MonthTransform:
		f.Transform = TransformMonth
	case iceberg.DayTransform:
		f.Transform = TransformDay
	case iceberg.HourTransform:
		f.Transform = TransformHour
	default:
		return f, false
	}
	return f, true
}
