package catalog

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// withoutResponseIDs makes the S3 errors of a client built from the
// resolved configuration read without what a server or a request puts in
// them at random. gocloud's S3 driver (v0.46.0), which iceberg-go reads
// and writes through, takes any S3 error whose text contains "301" for a
// redirect to a missing bucket, and iceberg-go then reports fs.ErrNotExist
// and drops the cause. A response's request ID and host ID are random
// (MinIO's host ID is a hash fixed per server), so a rejected secret or a
// 503 of an unlucky server read "file does not exist": a false "missing
// file" for the deep audit, a wrong hint for every command
// (TestS3IDsAreNotRedirects). A request that got no response names its URL
// and the server's address: an object key with "301" in its UUID, or a
// port such as 30100, made a sink that met its storage down stop for good
// on a missing metadata file instead of retrying (the fault campaign's
// storage scenario; TestS3UnreachableIsNotMissing). Such errors now keep
// the operation and the network error without addresses; the full text is
// logged at debug level. A real 301 still says "StatusCode: 301".
func (s *s3Storage) withoutResponseIDs(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("floeWithoutResponseIDs",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if re, ok := errors.AsType[*smithyhttp.ResponseError](err); ok {
				s.log.Debug("S3 request failed", "err", err)
				err = &idlessError{err: err, msg: fmt.Sprintf("https response error StatusCode: %d, %s", re.HTTPStatusCode(), withoutAddresses(re.Err))}
			}
			return out, md, err
		}), middleware.Before)
}

// withoutAddresses is the text of err, the cause of an S3 response error,
// without URLs and network addresses: for a request that got no response,
// the operation and the network error ("request send failed, Put: dial
// tcp: connect: connection refused").
func withoutAddresses(err error) string {
	if _, ok := errors.AsType[*smithyhttp.RequestSendError](err); !ok {
		return err.Error()
	}
	msg := "request send failed"
	ue, isURL := errors.AsType[*url.Error](err)
	if isURL {
		msg += ", " + ue.Op
	}
	switch oe, isNet := errors.AsType[*net.OpError](err); {
	case isNet:
		msg += ": " + oe.Op + " " + oe.Net + ": " + oe.Err.Error()
	case isURL:
		msg += ": " + ue.Err.Error()
	}
	return msg
}

// idlessError is an S3 response error whose text leaves out the response
// IDs and addresses; errors.As finds every error it wraps.
type idlessError struct {
	err error
	msg string
}

func (e *idlessError) Error() string { return e.msg }
func (e *idlessError) Unwrap() error { return e.err }
