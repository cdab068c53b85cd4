package catalog

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/aws/smithy-go"
	"github.com/uptrace/bun/driver/pgdriver"
)

// Errors that storage and catalog failures are classified into, so that
// callers can branch with errors.Is and users read what to fix.
var (
	// ErrBucketNotFound: the warehouse's bucket does not exist.
	ErrBucketNotFound = errors.New("bucket does not exist")
	// ErrStorageCredentials: the object store rejected the credentials
	// (unknown access key, signature mismatch, expired token).
	ErrStorageCredentials = errors.New("object store rejected the credentials")
	// ErrStorageUnreachable: nothing answers at the object store's endpoint.
	ErrStorageUnreachable = errors.New("object store unreachable")
	// ErrCatalogUnreachable: nothing answers at the catalog's address.
	ErrCatalogUnreachable = errors.New("catalog unreachable")
	// ErrCatalogAuth: the catalog rejected the credentials.
	ErrCatalogAuth = errors.New("catalog rejected the credentials")
	// ErrOwnedByAnotherCatalog: a new table's location already holds
	// Iceberg metadata that this catalog does not know.
	ErrOwnedByAnotherCatalog = errors.New("table location is owned by another catalog")
)

// Explain adds what to fix to an error, when it can tell from the error
// alone whose it is: a missing bucket, rejected credentials or an
// unreachable endpoint of the object store (an S3 request's error), or
// credentials a PostgreSQL or REST catalog rejected. Errors already
// classified (by Open, or by the catalog it returned, which know more),
// and all others, are returned as they are: a connection refused that no
// S3 request reported may be a broker's, and naming the wrong component
// would send the reader to fix the wrong thing.
//
// The floe command applies it once to whatever error any command ends
// with, so that the errors that reached a command without passing through
// the catalog (data and manifest files read and written by iceberg-go's
// storage) read the same in every command.
func Explain(err error) error {
	if err == nil || classified(err) {
		return err
	}
	switch storageKind(err) {
	case ErrBucketNotFound:
		return fmt.Errorf("%w: the table's bucket is gone (check --warehouse and the table's location): %w", ErrBucketNotFound, err)
	case ErrStorageCredentials:
		return fmt.Errorf("%w: check the S3 credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or --s3-* flags): %w", ErrStorageCredentials, err)
	case ErrStorageUnreachable:
		return fmt.Errorf("%w: nothing committed is lost; run the command again once the object store answers (a sink resumes from the ledger): %w", ErrStorageUnreachable, err)
	}
	if hint := catalogAuthHint(err); hint != "" {
		return fmt.Errorf("%w (%s): %w", ErrCatalogAuth, hint, err)
	}
	return err
}

// classified reports whether err already wraps one of the sentinels.
func classified(err error) bool {
	for _, known := range []error{ErrBucketNotFound, ErrStorageCredentials, ErrStorageUnreachable,
		ErrCatalogUnreachable, ErrCatalogAuth, ErrOwnedByAnotherCatalog} {
		if errors.Is(err, known) {
			return true
		}
	}
	return false
}

// explainCatalog classifies an error of a call to the catalog: nothing
// answering becomes ErrCatalogUnreachable, refused credentials
// ErrCatalogAuth. Callers have ruled out the object store (storageKind).
func explainCatalog(err error) error {
	var pgErr pgdriver.Error
	if isUnreachable(err) || errors.As(err, &pgErr) && pgUnavailable(pgErr.Field('C')) {
		return fmt.Errorf("%w (check the address in --catalog and that the server runs): %w", ErrCatalogUnreachable, err)
	}
	if hint := catalogAuthHint(err); hint != "" {
		return fmt.Errorf("%w (%s): %w", ErrCatalogAuth, hint, err)
	}
	return err
}

// pgUnavailable reports whether a PostgreSQL error code says the server
// went away or does not take connections: a connection exception (class
// 08), or a server shutting down or starting (57P01 to 57P03). Connections
// a pool held when the server stopped fail so before new ones are refused.
func pgUnavailable(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
}

// catalogAuthHint says what to check when err is a REST or PostgreSQL
// catalog's refusal of the credentials, and is empty otherwise.
func catalogAuthHint(err error) string {
	var pgErr pgdriver.Error
	switch {
	case errors.Is(err, rest.ErrUnauthorized), errors.Is(err, rest.ErrForbidden), errors.Is(err, rest.ErrOAuthError),
		errors.Is(err, rest.ErrAuthorizationExpired):
		return "check --catalog-token or --catalog-credential"
	case errors.As(err, &pgErr) && (pgErr.Field('C') == "28P01" || pgErr.Field('C') == "28000"):
		return "check the user and password in --catalog"
	}
	return ""
}

// storageKind returns the sentinel an object-store error belongs to, or
// nil. Only an S3 request's failure to reach its endpoint is the object
// store's: the catalog's database, Glue, a REST catalog and the brokers
// fail to be reached the same way.
func storageKind(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchBucket":
			return ErrBucketNotFound
		case "SignatureDoesNotMatch", "InvalidAccessKeyId", "InvalidClientTokenId", "ExpiredToken",
			"InvalidToken", "TokenRefreshRequired", "AuthorizationHeaderMalformed",
			"XAdminUserNotFound": // versitygw's answer to an unknown access key
			return ErrStorageCredentials
		}
	}
	if fromS3(err) && isUnreachable(err) {
		return ErrStorageUnreachable
	}
	return nil
}

// fromS3 reports whether err is the failure of an S3 request: the AWS
// SDK's S3 client, which iceberg-go's storage (through gocloud) and the
// start-up check use, reports every failure as an operation error of
// service S3.
func fromS3(err error) bool {
	var op *smithy.OperationError
	return errors.As(err, &op) && op.ServiceID == "S3"
}

// isUnreachable reports whether err says that nothing answered at a network
// address: refused or reset connection, unknown host, dial timeout.
func isUnreachable(err error) bool {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	case errors.As(err, &dns):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	}
	return false
}
