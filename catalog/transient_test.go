package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/floe-dev/floe/catalog"
)

func TestIsTransient(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("boom")}
	}
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	noSuchUpload := func(op string) error {
		return &smithy.OperationError{ServiceID: "S3", OperationName: op,
			Err: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 404}}, Err: api("NoSuchUpload")}}
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("write data files: %w", refused), true},
		{"classified unreachable", fmt.Errorf("x: %w", catalog.ErrStorageUnreachable), true},
		{"S3 503", status(503), true},
		{"S3 429", status(429), true},
		{"S3 SlowDown", api("SlowDown"), true},
		{"SQLite busy", errors.New("database is locked (5) (SQLITE_BUSY)"), true},
		{"REST 503", fmt.Errorf("load: %w", rest.ErrServiceUnavailable), true},
		{"REST unknown commit outcome", rest.ErrCommitStateUnknown, true},
		{"lost races", fmt.Errorf("gave up: %w", table.ErrCommitFailed), true},
		{"lost races, SQL catalog", errors.New("gave up: requirement failed: branch main has changed"), true},
		{"catalog unreachable", fmt.Errorf("reload: %w", catalog.ErrCatalogUnreachable), true},
		{"Kafka leader moving", kerr.NotLeaderForPartition, true},
		{"deadline", context.DeadlineExceeded, true},
		{"says it is transient", fmt.Errorf("resolve: %w", knows{true, errors.New("HTTP 503")}), true},
		{"multipart upload completed, its answer lost", noSuchUpload("CompleteMultipartUpload"), true},

		{"S3 403", status(403), false},
		{"multipart upload unknown to the server taking a part", noSuchUpload("UploadPart"), false},
		{"wrong secret", api("SignatureDoesNotMatch"), false},
		{"unknown key", api("InvalidAccessKeyId"), false},
		{"missing bucket", api("NoSuchBucket"), false},
		{"credentials classified", fmt.Errorf("x: %w", catalog.ErrStorageCredentials), false},
		{"catalog auth", fmt.Errorf("x: %w", catalog.ErrCatalogAuth), false},
		{"Kafka authorization", kerr.TopicAuthorizationFailed, false},
		{"interrupted", context.Canceled, false},
		{"plain", errors.New("table lake.t cannot hold floe rows"), false},
		// Its own word beats the heuristics on the message.
		{"says it is not transient", knows{false, errors.New("HTTP 401 behind a connection refused proxy")}, false},
		{"nil", nil, false},
	} {
		if got := catalog.IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// knows is an error of another package's client that says whether it is
// transient, as the schema registry client's errors do.
type knows struct {
	transient bool
	err       error
}

func (k knows) Error() string   { return k.err.Error() }
func (k knows) Transient() bool { return k.transient }
