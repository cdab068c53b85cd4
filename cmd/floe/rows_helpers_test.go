package main

import (
	"context"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// rowMultiset reads the rows of a snapshot (0: head) below a cut as a
// multiset of their full content, each row as floe as-of writes it in JSON.
func rowMultiset(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) (map[string]int, error) {
	out := map[string]int{}
	err := lookup.Rows(ctx, tbl, snapshotID, cut, func(r lookup.Row) error {
		out[string(r.JSON())]++
		return nil
	})
	return out, err
}

func countRows(m map[string]int) int {
	n := 0
	for _, c := range m {
		n += c
	}
	return n
}
