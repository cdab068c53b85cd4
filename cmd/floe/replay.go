package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

func newReplayCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "replay",
		Short:  "Rebuild a table by replaying the log (not built yet)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("floe replay is not built yet") },
	}
}

// demoReplay is the demo's rebuild step.
func demoReplay(ctx context.Context, w io.Writer, stack *localstack.Stack, tbl *snapshot.Table) error {
	return nil
}
