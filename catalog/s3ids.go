package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// withoutResponseIDs makes the S3 errors of a client built from the
// resolved configuration read without the response's request ID and host
// ID. gocloud's S3 driver (v0.46.0), which iceberg-go reads and writes
// through, takes any S3 error whose text contains "301" for a redirect to
// a missing bucket, and iceberg-go then reports fs.ErrNotExist and drops
// the cause. Those IDs are random (MinIO's host ID is a hash fixed per
// server), so a rejected secret or a 503 of an unlucky server read "file
// does not exist": a false "missing file" for the deep audit, a wrong hint
// for every command (TestS3IDsAreNotRedirects). The IDs are logged at debug
// level instead; a real 301 still says "StatusCode: 301".
func (s *s3Storage) withoutResponseIDs(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("floeWithoutResponseIDs",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok {
				s.log.Debug("S3 request failed", "err", err)
				err = &idlessError{err: err, msg: fmt.Sprintf("https response error StatusCode: %d, %v", re.HTTPStatusCode(), re.Err)}
			}
			return out, md, err
		}), middleware.Before)
}

// idlessError is an S3 response error whose text leaves out the response
// IDs; errors.As finds every error it wraps.
type idlessError struct {
	err error
	msg string
}

func (e *idlessError) Error() string { return e.msg }
func (e *idlessError) Unwrap() error { return e.err }
