package connector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/floe-dev/floe/catalog"
)

// TestInterruptedOnly: an interrupt alone (however wrapped or joined) is a
// clean stop; an interrupt joined with a real failure, as when a flush's
// files could not be written while the broker call beside it was
// cancelled, is not (a sink took it for one and exited 0 with its
// consumed records uncommitted).
func TestInterruptedOnly(t *testing.T) {
	canceled := fmt.Errorf("describe topic orders: %w", context.Canceled)
	failed := errors.New("write data files of lake.orders: PutObject: connection refused")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{canceled, true},
		{errors.Join(canceled, fmt.Errorf("read ledger: %w", context.Canceled)), true},
		{errors.Join(canceled, failed), false},
		{fmt.Errorf("session: %w", errors.Join(failed, canceled)), false},
		{failed, false},
		{context.DeadlineExceeded, false},
		// A catalog call cut short, whatever the driver made of it
		// (database/sql inside a transaction); from a review.
		{fmt.Errorf("load table lake.orders: %w", &catalog.InterruptedError{Err: sql.ErrTxDone, Cause: context.Canceled}), true},
		{errors.Join(&catalog.InterruptedError{Err: sql.ErrTxDone, Cause: context.Canceled}, failed), false},
	} {
		if got := interruptedOnly(c.err); got != c.want {
			t.Errorf("interruptedOnly(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
