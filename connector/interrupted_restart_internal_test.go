package connector

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestInterruptedRestart: an interrupt that cut a check short ("describe
// topic: context canceled") while the last flush found the ledger back
// ended the run with an error, though that flush was in (a run of
// TestLedgerBackAtLastFlushIsNoFailure under load). Beside errors of the
// interrupt only, the restart is what ended the session; beside a real
// failure it is not.
func TestInterruptedRestart(t *testing.T) {
	cut := fmt.Errorf("describe topic t: %w", context.Canceled)
	for _, c := range []struct {
		err  error
		want error
	}{
		{errors.Join(cut, errLedgerBack), errLedgerBack},
		{errors.Join(cut, errPartitionsChanged), errPartitionsChanged},
		{errors.Join(errors.New("storage down"), errLedgerBack), nil},
		{errors.Join(cut, cut), nil},
		{errLedgerBack, nil},
		{cut, nil},
	} {
		if got := interruptedRestart(c.err); got != c.want {
			t.Errorf("interruptedRestart(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
