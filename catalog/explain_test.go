package catalog_test

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/aws/smithy-go"

	"github.com/floe-dev/floe/catalog"
)

// TestExplain: an error is attributed to the component whose error it is,
// from the error alone; a connection refused that no S3 request reported
// (a broker's, a REST catalog's, a schema registry's) is left as it is
// rather than called the object store's.
func TestExplain(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	s3op := func(err error) error {
		return &smithy.OperationError{ServiceID: "S3", OperationName: "GetObject", Err: err}
	}
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	classified := fmt.Errorf("reload: %w", catalog.ErrCatalogUnreachable)
	for _, c := range []struct {
		name string
		err  error
		want error // nil: returned unchanged
	}{
		{"S3 request refused", fmt.Errorf("read manifest: %w", s3op(refused)), catalog.ErrStorageUnreachable},
		{"S3 wrong secret", s3op(api("SignatureDoesNotMatch")), catalog.ErrStorageCredentials},
		{"S3 missing bucket", s3op(api("NoSuchBucket")), catalog.ErrBucketNotFound},
		{"REST catalog refuses the token", fmt.Errorf("load table: %w", rest.ErrUnauthorized), catalog.ErrCatalogAuth},
		{"broker refused", fmt.Errorf("dial brokers: %w", refused), nil},
		{"REST catalog refused", &url.Error{Op: "Get", URL: "http://127.0.0.1:1/v1/config", Err: refused}, nil},
		{"Glue refused", &smithy.OperationError{ServiceID: "Glue", OperationName: "GetTable", Err: refused}, nil},
		{"already classified", classified, nil},
		{"plain", errors.New("table lake.t cannot hold floe rows"), nil},
	} {
		got := catalog.Explain(c.err)
		if c.want == nil {
			if got != c.err {
				t.Errorf("%s: Explain(%v) = %v, want it unchanged", c.name, c.err, got)
			}
			continue
		}
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) || !strings.HasPrefix(got.Error(), c.want.Error()) {
			t.Errorf("%s: Explain(%v) = %v, want it to start with %q and wrap the error", c.name, c.err, got, c.want)
		}
	}
	if catalog.Explain(nil) != nil {
		t.Error("Explain(nil) != nil")
	}
}

// TestParseIdentRefusesInvalidNames: a name no catalog can hold is reported
// as invalid, not as a table that does not exist.
func TestParseIdentRefusesInvalidNames(t *testing.T) {
	for in, want := range map[string]string{
		"orders":    "want NAMESPACE.TABLE",
		"lake.":     "empty name part",
		"lake.a/b":  `invalid name part "a/b"`,
		"lake. a":   `invalid name part " a"`,
		"lake.a\tb": "control character",
	} {
		if _, err := catalog.ParseIdent(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseIdent(%q): %v; want an error containing %q", in, err, want)
		}
	}
	for _, ok := range []string{"lake.orders", "a.b.orders", "lake.order lines", "lake.Ordérs$1"} {
		if _, err := catalog.ParseIdent(ok); err != nil {
			t.Errorf("ParseIdent(%q): %v", ok, err)
		}
	}
}
