package catalog

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/uptrace/bun/driver/pgdriver"
)

// IsTransient reports whether err is a failure of storage, the catalog, the
// brokers or the schema registry that may pass on its own: nothing
// answering (connection refused or reset, a timeout), a server error or
// throttling (HTTP 5xx or 429, S3's SlowDown), a catalog busy or restarting (SQLite's "database is
// locked", PostgreSQL shutting down or out of connections, an Iceberg REST
// catalog's 503), a retriable Kafka error, or a commit whose outcome is
// unknown. A writer that restarts from the ledger after such an error loses
// nothing and duplicates nothing, so it may try again.
//
// What a person must fix is never transient, even when it arrives as an
// HTTP error: rejected credentials, a missing bucket, a table location
// owned by another catalog. Neither are floe's own verdicts (a data loss, a
// fenced writer, a recreated topic), which carry no network error.
//
// An error of a client this package cannot import (the schema registry's,
// in package connector) that knows the answer says it with a method
// Transient() bool, which IsTransient takes as it is.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	for _, fix := range []error{ErrBucketNotFound, ErrStorageCredentials, ErrCatalogAuth, ErrOwnedByAnotherCatalog, ErrCatalogFileReplaced} {
		if errors.Is(err, fix) {
			return false
		}
	}
	var knows interface{ Transient() bool }
	if errors.As(err, &knows) {
		return knows.Transient()
	}
	switch storageKind(err) {
	case ErrBucketNotFound, ErrStorageCredentials:
		return false
	case ErrStorageUnreachable:
		return true
	}
	if errors.Is(err, ErrStorageUnreachable) || errors.Is(err, ErrCatalogUnreachable) || isUnreachable(err) {
		return true
	}
	var (
		resp *smithyhttp.ResponseError
		api  smithy.APIError
		ne   net.Error
		pg   pgdriver.Error
		ke   *kerr.Error
	)
	if op := (*smithy.OperationError)(nil); errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" &&
		errors.As(err, &op) && op.OperationName == "CompleteMultipartUpload" {
		// A CompleteMultipartUpload whose answer was lost: the SDK sends
		// it again, and MinIO, which completed the upload, answers 404
		// NoSuchUpload. Writing the files again passes; the completed
		// object is an orphan (from a review). NoSuchUpload at another
		// step (gateways that do not share uploads) stays permanent.
		return true
	}
	switch {
	case errors.As(err, &resp) && resp.HTTPStatusCode() != 0:
		// Status 0: no answer came (the request's connection failed);
		// the cause below says whether that passes.
		code := resp.HTTPStatusCode()
		return code >= 500 || code == 429 || code == 408
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling", "ThrottlingException",
			"RequestLimitExceeded", "TooManyRequestsException", "ConcurrentModificationException":
			return true
		}
	case errors.Is(err, rest.ErrServiceUnavailable), errors.Is(err, rest.ErrServerError), errors.Is(err, rest.ErrCommitStateUnknown):
		return true
	case errors.As(err, &pg):
		code := pg.Field('C')
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P") || code == "53300" || code == "40001" || code == "40P01"
	case errors.As(err, &ke):
		return ke.Retriable
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT):
		return true
	case errors.Is(err, io.EOF):
		// A connection the other end closed: a broker restarting, or a
		// proxy dropping it. franz-go does not retry it when it is the
		// first read of a connection (missing SASL or TLS look the same),
		// but a sink only retries once it runs, after its start reached
		// the brokers.
		return true
	case errors.Is(err, table.ErrCommitFailed), strings.Contains(err.Error(), "requirement failed"):
		// A catalog's answer to a lost race (iceberg-go's SQL catalog
		// reports a stale branch head as a plain "requirement failed", as
		// snapshot's commit loop knows too), here after the writer ran
		// out of attempts: the next try reloads.
		return true
	}
	msg := err.Error()
	return sqliteBusy(err) || strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset by peer")
}

// sqliteBusy reports SQLite's answer that another connection holds the
// database's lock, which SQLite (modernc) reports as text only.
func sqliteBusy(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY")
}

// IsRefused reports whether err is a catalog's refusal of a request that
// it did not apply and that asking again does not change: a PostgreSQL
// catalog's error of SQLSTATE class 42, an access rule (its user lacks a
// privilege: 42501). A commit refused so is no outcome unknown: nothing
// of it was applied, and what it wrote can go (a compaction as a
// SELECT-only role retried five times as unknown, and kept its files as
// orphans: a new user's run).
func IsRefused(err error) bool {
	var pgErr pgdriver.Error
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Field('C'), "42")
}
