package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/snapshot"
)

// retentionFlags set the table properties a sink's own expiry reads
// (docs/maintenance.md): floe had no way to set them, and an operator had
// to reach for Spark or PyIceberg (from a new-user run).
type retentionFlags struct {
	maxAge       time.Duration
	minSnapshots int
	maxSnapshots int
}

func (f *retentionFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.maxAge, "set-max-snapshot-age", 0,
		"set the table's history.expire.max-snapshot-age-ms, kept in the table: the sinks' own expiry removes snapshots older than this (floe's default 1h)")
	fs.IntVar(&f.minSnapshots, "set-min-snapshots", 0,
		"set the table's history.expire.min-snapshots-to-keep: the sinks' own expiry keeps at least the newest this many (floe's default 50)")
	fs.IntVar(&f.maxSnapshots, "set-max-snapshots", 0,
		"set the table's floe.history.max-snapshots: the sinks' own expiry removes snapshots beyond the newest this many, whatever their age (0: no cap; floe's default 100)")
}

// properties returns the table properties the flags given in fs set, or
// why a value is refused.
func (f *retentionFlags) properties(fs *pflag.FlagSet) (map[string]string, error) {
	props := map[string]string{}
	if fs.Changed("set-max-snapshot-age") {
		if f.maxAge < time.Millisecond {
			return nil, fmt.Errorf("--set-max-snapshot-age %s: want a duration of at least 1ms (24h, 7d is 168h)", f.maxAge)
		}
		props["history.expire.max-snapshot-age-ms"] = strconv.FormatInt(f.maxAge.Milliseconds(), 10)
	}
	if fs.Changed("set-min-snapshots") {
		if f.minSnapshots < 1 {
			return nil, fmt.Errorf("--set-min-snapshots %d: want at least 1 (a branch's head is always kept)", f.minSnapshots)
		}
		props["history.expire.min-snapshots-to-keep"] = strconv.Itoa(f.minSnapshots)
	}
	if fs.Changed("set-max-snapshots") {
		if f.maxSnapshots < 0 {
			return nil, fmt.Errorf("--set-max-snapshots %d: want 0 (no cap) or more", f.maxSnapshots)
		}
		props[snapshot.PropMaxSnapshots] = strconv.Itoa(f.maxSnapshots)
	}
	return props, nil
}

// setRetention sets props on tbl (unless dryRun) and says so on out.
func setRetention(ctx context.Context, out io.Writer, tbl *snapshot.Table, props map[string]string, dryRun bool) error {
	if len(props) == 0 {
		return nil
	}
	var set []string
	for _, k := range slices.Sorted(maps.Keys(props)) {
		set = append(set, k+"="+props[k])
	}
	verb := "set"
	if dryRun {
		verb = "would set"
	} else if err := tbl.SetProperties(ctx, props); err != nil {
		return fmt.Errorf("set the snapshot retention of %s: %w", tbl.Name(), err)
	}
	if out != nil {
		fmt.Fprintf(out, "retention: %s %s (the sinks' own expiry reads them at each maintenance)\n", verb, strings.Join(set, ", "))
	}
	return nil
}
