package main

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/testenv"
)

// TestPostgresCatalogHintOnce (from a review): against a real PostgreSQL
// server, two catalog errors print their explanation twice in one line
// (the catalog package explains the error where it opens the catalog, and
// catalog.Explain in run explains the wrapped error again):
//   - sslmode=require or verify-full against a server without TLS:
//     "...; the server does not offer TLS: add ?sslmode=disable to the
//     catalog's URL; the server does not offer TLS: add ?sslmode=disable
//     to the catalog's URL; check --catalog";
//   - a database that holds no Iceberg catalog (floe status on a fresh
//     database): "the database holds no Iceberg catalog: ... " twice.
//
// Also, to a user who asked for verify-full, the only advice given is to
// turn TLS off (the catalog's password then crosses the network in clear);
// it should name enabling TLS on the server first.
func TestPostgresCatalogHintOnce(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, tc := range []struct{ query, hint string }{
		{"sslmode=require", "the server does not offer TLS"},
		{"sslmode=verify-full", "the server does not offer TLS"},
		{"sslmode=disable", "the database holds no Iceberg catalog"},
	} {
		uri := strings.Replace(pg.URI, "sslmode=disable", tc.query, 1)
		code, _, errs := floe(t, "status", "--catalog", uri, "--table", "lake.orders")
		line := errorLine(errs)
		if code != exitError || strings.Count(line, tc.hint) != 1 {
			t.Errorf("%s: exit %d, %q %d times in the error line:\n%s", tc.query, code, tc.hint, strings.Count(line, tc.hint), line)
		}
	}
}
