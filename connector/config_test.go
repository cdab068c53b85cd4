package connector_test

import (
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
)

// TestConfigFlushThresholds: in the Go API a zero flush threshold means the
// default (the zero value of Config is usable), a negative one is an error
// rather than a silent default.
func TestConfigFlushThresholds(t *testing.T) {
	if err := (connector.Config{Topic: "t"}).Validate(); err != nil {
		t.Errorf("zero thresholds (the defaults): %v", err)
	}
	for _, c := range []connector.Config{
		{Topic: "t", FlushRecords: -5},
		{Topic: "t", FlushBytes: -1},
		{Topic: "t", FlushInterval: -time.Second},
	} {
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "want 0 (the default) or more") {
			t.Errorf("%d records, %d bytes, %s: got %v, want an error", c.FlushRecords, c.FlushBytes, c.FlushInterval, err)
		}
	}
}
