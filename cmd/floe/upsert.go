package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// upsertFlags say which mode a table has (--mode), and an upsert table's
// key (--id-columns, or the record key by --key) and format version.
type upsertFlags struct {
	mode          string
	idColumns     []string
	formatVersion int
	// flags tell whether --format-version was given.
	flags *pflag.FlagSet
}

func (f *upsertFlags) register(fs *pflag.FlagSet) {
	f.flags = fs
	fs.StringVar(&f.mode, "mode", "",
		"append: every record is a row (the log); upsert: one row per key, the latest record's, a tombstone (null value) deleting the key, written as equality deletes (docs/upsert.md). A new table gets it (default append); an existing table keeps its own, and another --mode is refused")
	fs.StringSliceVar(&f.idColumns, "id-columns", nil,
		"with --mode upsert: key the rows by these value columns, `COLUMN[,COLUMN]` (with --value json or registry); without it the key is the record key: kafka_key for --key string or raw, one column per field of the key for --key json or registry")
	fs.IntVar(&f.formatVersion, "format-version", 2, "Iceberg format version of a new table: 2, or 3 (an existing table keeps its own, and a run that gives another is warned)")
}

// pipeline completes p, whose layout is set, with the mode, key and table
// properties the flags (and the config file's pipeline from) ask for.
func (f *upsertFlags) pipeline(p *connector.Pipeline, from pipeline) error {
	mode, idColumns := f.mode, f.idColumns
	if from.Mode != "" {
		mode = from.Mode
	}
	if from.IDColumns != nil {
		idColumns = from.IDColumns
	}
	if p.Layout.Envelope == mapping.EnvelopeDebezium {
		// A Debezium table mirrors the source table row by primary key,
		// which is the record key.
		switch {
		case mode == "":
			mode = string(mapping.ModeUpsert)
		case mode != string(mapping.ModeUpsert):
			return fmt.Errorf("--envelope debezium makes an upsert table, not --mode %s: leave --mode out", mode)
		}
		if len(idColumns) > 0 {
			return fmt.Errorf("--envelope debezium keys the rows by the record key (the source table's primary key): leave --id-columns %s out", strings.Join(idColumns, ","))
		}
	}
	if f.formatVersion != 2 && f.formatVersion != 3 {
		return fmt.Errorf("--format-version %d: want 2 or 3", f.formatVersion)
	}
	if f.flags != nil && f.flags.Changed("format-version") {
		// Given, it is checked against an existing table's (a new one
		// gets 2, iceberg-go's default, without it).
		p.Properties = map[string]string{table.PropertyFormatVersion: strconv.Itoa(f.formatVersion)}
	}
	if mode == "" {
		if len(idColumns) == 0 {
			return nil
		}
		refusal := fmt.Errorf("--id-columns %s keys an upsert table: add --mode upsert", strings.Join(idColumns, ","))
		// An existing table judges the key by its own mode: an upsert
		// table, which a later run may sink into without --mode, takes
		// it when it is the table's key and names the table's key when
		// it is not (connector's open). A new table needs --mode.
		l := p.Layout
		if l.Value == "" {
			l.Value = mapping.ValueJSON
		}
		if l.Normalize() != nil {
			return refusal
		}
		k, err := mapping.KeyFor(l, idColumns)
		if err != nil {
			return refusal
		}
		p.Key, p.NewTableRefusal = &k, refusal
		return nil
	}
	m, err := mapping.ParseMode(mode)
	if err != nil || m == mapping.ModeFold {
		return fmt.Errorf("--mode %q: want append or upsert (upsert keeps the latest value per key, as floe replay --fold latest does)", mode)
	}
	p.Mode = m
	if m != mapping.ModeUpsert {
		if len(idColumns) > 0 {
			return fmt.Errorf("--id-columns %s keys an upsert table, not --mode %s: use --mode upsert", strings.Join(idColumns, ","), m)
		}
		return nil
	}
	if len(idColumns) == 0 && (p.Layout.Key == "" || p.Layout.Value == "") {
		// The record key, as the table (or a new table's layout) has it:
		// with --value left out, the table's values decide which
		// (snapshot.Open, which checks a new table's too).
		return nil
	}
	l := p.Layout
	if l.Value == "" {
		// --id-columns with --value left out: the table's values, which
		// must be decoded (checked when it is opened, or created).
		l.Value = mapping.ValueJSON
	}
	if err := l.Normalize(); err != nil {
		return err
	}
	k, err := mapping.KeyFor(l, idColumns)
	if err != nil {
		return err
	}
	p.Key = &k
	return nil
}
