package catalog_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/floe-dev/floe/catalog"
)

// TestS3SendFailureIsTransient (from a review): the AWS SDK's error for an S3
// request whose connection closed before an answer, after its own
// retries ("operation error S3: PutObject, exceeded maximum number of
// attempts, 3, https response error StatusCode: 0, request send failed,
// Put: EOF", seen from a sink's dead-letter reconcile behind a proxy that
// drops answers) carries a response error with status 0 around the EOF.
// It is transient, as a bare EOF is: a sink must retry, not stop.
func TestS3SendFailureIsTransient(t *testing.T) {
	send := &smithyhttp.RequestSendError{Err: &url.Error{Op: "Put", URL: "http://127.0.0.1:1/lake/x.parquet", Err: io.EOF}}
	err := &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{}}, Err: send}}
	t.Logf("%v", err)
	if !catalog.IsTransient(err) {
		t.Errorf("not transient: %v", err)
	}
}
