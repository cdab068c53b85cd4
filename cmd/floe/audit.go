package main

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

func newAuditCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "audit",
		Short:  "Prove a table complete against its ledger (not built yet)",
		Hidden: true,
		RunE:   func(*cobra.Command, []string) error { return errors.New("floe audit is not built yet") },
	}
}

// demoAudit is the demo's audit step.
func demoAudit(ctx context.Context, w io.Writer, stack *localstack.Stack, tbl *snapshot.Table) error {
	return nil
}
