package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newWhereCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "where",
		Short:  "Find the snapshot, range and file holding an offset (not built yet)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("floe where is not built yet") },
	}
}

func newAsOfCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "as-of",
		Short:  "Show the table as of offsets or a time (not built yet)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("floe as-of is not built yet") },
	}
}
