package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// Partitioning. A table's requested spec (mapping.PartitionBy) is recorded
// in its property mapping.PropPartitionBy; its Iceberg spec holds the
// requested fields whose columns exist. A field on a value column of a
// typed table that has not appeared yet is added to the spec by the commit
// whose schema change creates the column, in the same transaction (see
// stagePartitionFields), so no data file of that column is ever written
// under a spec without it. Every data file is written by iceberg-go's
// partitioned writer from rows of one Kafka partition, so a file holds one
// Kafka partition and one Iceberg partition value.

// newSpec returns the spec of a new table of schema s asked to be
// partitioned by p: the fields whose columns s has.
func newSpec(s *iceberg.Schema, p mapping.PartitionBy) (*iceberg.PartitionSpec, error) {
	var opts []iceberg.PartitionOption
	for _, f := range p.Fields {
		col, ok, err := f.Source(s)
		if err != nil {
			return nil, &mapping.PartitionByError{Spec: p.String(), Part: f.String(), Problem: err.Error()}
		}
		if !ok {
			continue
		}
		opts = append(opts, iceberg.AddPartitionFieldBySourceID(col.ID, f.Name(), f.IcebergTransform(), s, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("build the partition spec %s: %w", p, err)
	}
	return &spec, nil
}

// CheckNew reports what would keep Open from creating a table with these
// options: a layout that is not valid, or a partition spec the new table's
// columns cannot take (a *mapping.PartitionByError). It reads nothing, so a
// caller opening several tables can check them all before it creates any.
func (o OpenOptions) CheckNew() error {
	l := o.Layout
	if err := l.Normalize(); err != nil {
		return err
	}
	if o.Mode == mapping.ModeUpsert && o.Key != nil && o.Key.Source == mapping.KeyFromValue && !l.Typed() {
		// Asked for with the value mode left to the table, which a new
		// table gets as raw.
		return &mapping.KeyError{Problem: "--id-columns names value columns, and a new table's values are raw (no --value): decode them (--value json or registry)"}
	}
	if o.Mode == mapping.ModeUpsert {
		// The key is checked before the table is created too: its error
		// read as one of loading the table (from a new-user run).
		key, err := o.newKey()
		if err != nil {
			return err
		}
		if o.PartitionBy != nil {
			if err := key.CheckPartitionBy(*o.PartitionBy); err != nil {
				return err
			}
		}
	}
	if o.PartitionBy == nil {
		return nil
	}
	s := o.Schema
	if s == nil {
		s = l.Schema()
	}
	return l.CheckPartitionBy(*o.PartitionBy, s)
}

// CheckSpecFillable reports, as a *mapping.PartitionByError, a field of
// the table's partition spec (kept by a sink without --partition-by) on a
// column floe's rows never fill: every data file's write would fail, after
// the run's first commit (from a new-user run, on a table another engine
// created). In typed layouts every column that is not floe's own is a
// value column, filled by the records that have it.
func (t *Table) CheckSpecFillable() error {
	l := t.layout
	if l.Typed() {
		return nil
	}
	s, own, spec := t.tbl.Schema(), l.Schema(), t.tbl.Spec()
	for _, pf := range spec.Fields() {
		if _, void := pf.Transform.(iceberg.VoidTransform); void {
			continue
		}
		col, _ := s.FindColumnName(pf.SourceID())
		top, _, _ := strings.Cut(col, ".")
		if _, ok := own.FindFieldByName(top); ok || (l.TypedKey() && top == mapping.ColKey) {
			continue
		}
		var fills []string
		for _, f := range own.Fields() {
			fills = append(fills, f.Name)
		}
		return &mapping.PartitionByError{Spec: specText(spec, s), Table: t.Name(), Part: pf.Name, TableSpec: true,
			Problem: fmt.Sprintf("the table's partition spec partitions by %s, which floe does not fill in a table of %s values (it fills %s): pass --partition-by none to replace the spec (or --partition-by on those columns, day(%s) for one), or sink into a new table",
				col, l.Value, strings.Join(fills, ", "), mapping.ColTimestamp)}
	}
	return nil
}

// PartitionBy returns the partition spec the table was last asked for
// (mapping.PropPartitionBy), nil when it records none (it was created
// without one, by an older floe, or by another engine; its Iceberg spec is
// then whatever it is).
func (t *Table) PartitionBy() (*mapping.PartitionBy, error) {
	return t.partitionByOf(t.tbl)
}

// partitionByOf is PartitionBy of tbl, the table as loaded at some point.
func (t *Table) partitionByOf(tbl *table.Table) (*mapping.PartitionBy, error) {
	v, ok := tbl.Properties()[mapping.PropPartitionBy]
	if !ok {
		return nil, nil
	}
	p, err := mapping.ParsePartitionBy(v)
	if err != nil {
		return nil, fmt.Errorf("table %s: property %s: %w", t.Name(), mapping.PropPartitionBy, err)
	}
	return &p, nil
}

// PendingPartitionFields returns the fields of the requested spec that are
// not in the table's spec because their column does not exist yet: they
// are added with the commit that creates it.
func (t *Table) PendingPartitionFields() ([]mapping.PartitionField, error) {
	p, err := t.PartitionBy()
	if p == nil || err != nil {
		return nil, err
	}
	var out []mapping.PartitionField
	for _, f := range p.Fields {
		if _, ok, _ := f.Source(t.tbl.Schema()); !ok {
			out = append(out, f)
		}
	}
	return out, nil
}

// PartitionSpec is the table's Iceberg partition spec, written as
// --partition-by asks for it ("none": unpartitioned).
func (t *Table) PartitionSpec() string { return specText(t.tbl.Spec(), t.tbl.Schema()) }

// CheckPartitionBy reports, as a *mapping.PartitionByError, a field of p
// the table cannot be partitioned by (Layout.CheckPartitionBy).
func (t *Table) CheckPartitionBy(p mapping.PartitionBy) error {
	err := t.layout.CheckPartitionBy(p, t.tbl.Schema())
	if err == nil && t.mode == mapping.ModeUpsert {
		err = t.key.CheckPartitionBy(p)
	}
	if pe, ok := err.(*mapping.PartitionByError); ok {
		pe.Table = t.Name()
	}
	return err
}

// SetPartitionBy makes p the table's partition spec, by Iceberg partition
// spec evolution: fields of the current spec that p does not ask for are
// removed, the fields p asks for whose columns exist are added (the others
// wait for their columns), and p is recorded (mapping.PropPartitionBy), in
// one metadata commit that writes no snapshot. Data files keep the spec
// they were written with, so a query over both old and new files is still
// pruned correctly; only files written from then on have the new spec.
// Nothing is committed when the table already has p. A change is logged
// to log (nil: slog.Default()).
//
// The spec is the table's, shared by its branches.
func (t *Table) SetPartitionBy(ctx context.Context, p mapping.PartitionBy, log *slog.Logger) error {
	if err := t.writable("partition"); err != nil {
		return err
	}
	if err := t.CheckPartitionBy(p); err != nil {
		return err
	}
	if log == nil {
		log = slog.Default()
	}
	const maxAttempts = 5
	for attempt := 1; ; attempt++ {
		before := t.tbl.Spec()
		txn := t.tbl.NewTransaction()
		changed, err := stageSpec(txn, t.tbl.Schema(), p)
		if err != nil {
			return fmt.Errorf("stage the partition spec %s of %s: %w", p, t.Name(), err)
		}
		recorded := t.tbl.Properties()[mapping.PropPartitionBy]
		if !changed && recorded == p.String() {
			return nil
		}
		if changed && t.mode == mapping.ModeUpsert && holdsFiles(t.tbl.Metadata()) {
			return &mapping.PartitionByError{Spec: p.String(), Table: t.Name(),
				Problem: fmt.Sprintf("an upsert table's partition spec cannot change once it holds files (it is %s): the equality deletes written under a new spec would not reach the rows written under the old one; leave --partition-by out, or replay the table into a new one with this spec (floe replay --mode upsert --partition-by)", specText(before, t.tbl.Schema()))}
		}
		if recorded != p.String() {
			if err := txn.SetProperties(iceberg.Properties{mapping.PropPartitionBy: p.String()}); err != nil {
				return fmt.Errorf("record the partition spec %s of %s: %w", p, t.Name(), err)
			}
		}
		tbl, err := txn.Commit(ctx)
		if err != nil && isConflict(err) && attempt < maxAttempts {
			if err := t.Refresh(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("commit the partition spec %s of %s: %w", p, t.Name(), err)
		}
		if err := t.adoptCommitted(ctx, tbl); err != nil {
			return err
		}
		if changed {
			// Changing the spec of a table that holds data is worth a
			// warning: a --partition-by (or a config file's) that was not
			// meant for this table changes how every later file is laid out.
			level, msg := slog.LevelInfo, "partition spec set"
			from, to := specText(before, t.tbl.Schema()), specText(t.tbl.Spec(), t.tbl.Schema())
			if len(t.tbl.Metadata().Snapshots()) > 0 {
				level, msg = slog.LevelWarn, "partition spec changed: files written before keep the spec they were written with"
				t.specChange = &SpecChange{From: from, To: to}
			}
			log.Log(ctx, level, msg, "table", t.Name(), "from", from, "to", to, "requested", p.String())
		}
		return nil
	}
}

// SpecChange is a change of partition spec SetPartitionBy made to a table
// that held snapshots, From and To written as --partition-by takes them.
type SpecChange struct{ From, To string }

// SpecChange is the change of partition spec SetPartitionBy made through
// this Table while the table held snapshots, for a run's summary to
// repeat the log's warning (a new user's report: it scrolled by unseen);
// nil without one.
func (t *Table) SpecChange() *SpecChange { return t.specChange }

// stageSpec stages in txn the partition spec evolution that makes the
// spec of a table of schema s the fields of p whose columns s has, and
// reports whether there is any. Fields of the current spec that
// --partition-by cannot ask for (another engine's) are removed too.
func stageSpec(txn *table.Transaction, s *iceberg.Schema, p mapping.PartitionBy) (bool, error) {
	staged, err := txn.StagedTable()
	if err != nil {
		return false, err
	}
	var remove []string // partition field names
	have := map[mapping.PartitionField]bool{}
	spec := staged.Spec()
	for _, pf := range spec.Fields() {
		if _, void := pf.Transform.(iceberg.VoidTransform); void {
			continue // a field format v1 keeps after its removal
		}
		col, _ := s.FindColumnName(pf.SourceID())
		f, ok := mapping.PartitionFieldOf(col, pf.Transform)
		if !ok || !slices.Contains(p.Fields, f) {
			remove = append(remove, pf.Name)
			continue
		}
		have[f] = true
	}
	var add []mapping.PartitionField
	for _, f := range p.Fields {
		if _, ok, err := f.Source(s); err == nil && ok && !have[f] {
			add = append(add, f)
		}
	}
	if len(add) == 0 && len(remove) == 0 {
		return false, nil
	}
	upd := txn.UpdateSpec(true)
	for _, name := range remove {
		upd.RemoveField(name)
	}
	for _, f := range add {
		upd.AddField(f.Column, f.IcebergTransform(), f.Name())
	}
	return true, upd.Commit()
}

// holdsFiles reports whether a snapshot of meta, on any branch, holds data
// or delete files (one without a summary is taken to).
func holdsFiles(meta table.Metadata) bool {
	for _, s := range meta.Snapshots() {
		if s.Summary == nil {
			return true
		}
		for _, key := range []string{"total-data-files", "total-delete-files"} {
			if n, ok := s.Summary.Properties[key]; ok && n != "0" {
				return true
			}
		}
	}
	return false
}

// stagePartitionFields adds to the spec staged in txn the requested fields
// (mapping.PropPartitionBy) on columns that txn's schema change creates,
// so that the columns and their partition fields arrive in one commit. A
// column that appears with a type its transform does not take is a
// *mapping.PartitionByError: the spec cannot be applied to the rows, and
// writing them unpartitioned would be the silent mix the request forbids.
func (t *Table) stagePartitionFields(base *table.Table, txn *table.Transaction) error {
	p, err := t.partitionByOf(base)
	if p == nil || err != nil {
		return err
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return fmt.Errorf("stage the schema change of %s: %w", t.Name(), err)
	}
	before, after := base.Schema(), staged.Schema()
	var add []mapping.PartitionField
	for _, f := range p.Fields {
		if _, had, _ := f.Source(before); had {
			continue
		}
		_, has, err := f.Source(after)
		if err != nil {
			return &mapping.PartitionByError{Spec: p.String(), Part: f.String(), Table: t.Name(),
				Problem: fmt.Sprintf("the column appeared, but %v; give the table a spec its columns take (--partition-by with another field, or none), and the sink goes on", err)}
		}
		if has {
			add = append(add, f)
		}
	}
	if len(add) == 0 {
		return nil
	}
	upd := txn.UpdateSpec(true)
	for _, f := range add {
		upd.AddField(f.Column, f.IcebergTransform(), f.Name())
	}
	if err := upd.Commit(); err != nil {
		return fmt.Errorf("stage the partition fields %v of %s with the columns they need: %w", add, t.Name(), err)
	}
	return nil
}

// specText writes a spec as --partition-by would ask for it.
func specText(spec iceberg.PartitionSpec, s *iceberg.Schema) string {
	var p mapping.PartitionBy
	var other []string
	for _, pf := range spec.Fields() {
		col, _ := s.FindColumnName(pf.SourceID())
		if f, ok := mapping.PartitionFieldOf(col, pf.Transform); ok {
			p.Fields = append(p.Fields, f)
		} else {
			other = append(other, fmt.Sprintf("%s(%s)", pf.Transform, col))
		}
	}
	if len(p.Fields) > 0 {
		other = append([]string{p.String()}, other...)
	}
	if len(other) > 0 {
		return strings.Join(other, ", ")
	}
	return p.String()
}

// writeShape identifies what a flush's data files were written for: the
// table's schema (when the flush evolves it: f.Schema) and its default
// partition spec. Files written for another shape than the table's at
// commit time are written again.
type writeShape struct{ schema, spec int }

func (t *Table) writeShape(f Flush) writeShape {
	s := writeShape{schema: -1, spec: t.tbl.Metadata().DefaultPartitionSpec()}
	if f.Schema != nil {
		s.schema = t.tbl.Schema().ID
	}
	return s
}
