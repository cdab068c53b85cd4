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
	// errNoStorageCredentials is ErrStorageCredentials (errors.Is) when
	// there are none to present: nothing was rejected.
	errNoStorageCredentials error = noCredentials{}
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

// Setting names a field of Config that an error is about. The catalog
// package does not know how its caller's users set them; the floe command
// maps each to its flag.
type Setting string

// Settings that errors name.
const (
	SettingCatalog           Setting = "Config.Catalog"
	SettingName              Setting = "Config.Name"
	SettingWarehouse         Setting = "Config.Warehouse"
	SettingToken             Setting = "Config.Token"
	SettingCredential        Setting = "Config.Credential"
	SettingS3Endpoint        Setting = "Config.S3.Endpoint"
	SettingS3Region          Setting = "Config.S3.Region"
	SettingS3AccessKeyID     Setting = "Config.S3.AccessKeyID"
	SettingS3SecretAccessKey Setting = "Config.S3.SecretAccessKey"
)

// s3Keys are the settings of static S3 credentials.
var s3Keys = []Setting{SettingS3AccessKeyID, SettingS3SecretAccessKey}

// ConfigError reports a setting that is missing or whose value cannot be
// used, before anything is opened.
type ConfigError struct {
	Setting Setting
	// Value is the value given; "" when the setting is missing.
	Value string
	// Want says what would do.
	Want string
}

func (e *ConfigError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s is not set: want %s", e.Setting, e.Want)
	}
	return fmt.Sprintf("%s %q: want %s", e.Setting, e.Value, e.Want)
}

// CheckError is an error that a different value of one of Settings may
// fix: a missing bucket (Warehouse), rejected credentials, an unreachable
// endpoint. Its message is Err's, which says what failed and names the
// environment variables that can fix it too.
type CheckError struct {
	Settings []Setting
	Err      error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// check wraps err as a *CheckError naming settings.
func check(err error, settings ...Setting) error {
	return &CheckError{Settings: settings, Err: err}
}

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
		return check(fmt.Errorf("%w: the table's bucket is gone (check the table's location): %w", ErrBucketNotFound, err), SettingWarehouse)
	case ErrStorageCredentials:
		return check(fmt.Errorf("%w: check the S3 credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE): %w", ErrStorageCredentials, err), s3Keys...)
	case ErrStorageUnreachable:
		return fmt.Errorf("%w: nothing committed is lost; run the command again once the object store answers (a sink resumes from the ledger): %w", ErrStorageUnreachable, err)
	}
	if hint, settings := catalogAuthHint(err); hint != "" {
		return check(fmt.Errorf("%w (%s): %w", ErrCatalogAuth, hint, err), settings...)
	}
	if hint := catalogSetupHint(err); hint != "" {
		return check(&setupError{err: err, hint: hint}, SettingCatalog)
	}
	return err
}

// setupError is a catalog error explained by a setup hint; classified
// knows it, so that explaining again adds nothing (the hint was printed
// twice: found by review).
type setupError struct {
	err  error
	hint string
}

func (e *setupError) Error() string { return e.err.Error() + "; " + e.hint }
func (e *setupError) Unwrap() error { return e.err }

// catalogSetupHint says what to fix when err is a PostgreSQL catalog's
// answer that its database is not one floe can use as given: it does not
// exist, holds no catalog (a command that only reads creates none), or
// was asked for TLS its server does not offer; empty otherwise.
func catalogSetupHint(err error) string {
	var pgErr pgdriver.Error
	switch {
	case errors.As(err, &pgErr) && pgErr.Field('C') == "3D000":
		return "the catalog's database does not exist: create it, or name another in the catalog's URL"
	case NoCatalogTables(err):
		return "the database holds no Iceberg catalog: no table was ever sunk into it (floe sink creates the catalog's tables); check that the catalog's URL names the database the tables are in"
	case errors.As(err, &pgErr) && pgErr.Field('C') == "42501":
		// insufficient_privilege: the driver named the schema or table
		// alone (from a new-user run with a least-privilege role).
		return "the catalog's user lacks a privilege: floe sink and floe replay read and write the catalog's tables iceberg_tables and iceberg_namespace_properties " +
			"(SELECT, INSERT, UPDATE, DELETE; floe maintain and floe drop too) and create them when missing (CREATE on the schema; once both exist, floe opens the catalog without creating them, as --catalog-prop init_catalog_tables=false does); " +
			"status, audit, where, as-of, files and dead-letters need SELECT only"
	case strings.Contains(err.Error(), "SSL is not enabled on the server"):
		return "the server does not offer TLS: turn it on there (ssl = on in postgresql.conf), or, on a network you trust, add ?sslmode=disable to the catalog's URL (the password then crosses it in clear); " +
			"a server that is not PostgreSQL (one that greets first, as SMTP does) answers so too: check the host and port in the catalog's URL"
	}
	return ""
}

// NoCatalogTables reports whether err is a PostgreSQL catalog's answer
// that its database holds no Iceberg catalog: none of its tables exist, as
// in a database no floe sink has created a table in yet.
func NoCatalogTables(err error) bool {
	var pgErr pgdriver.Error
	return errors.As(err, &pgErr) && pgErr.Field('C') == "42P01" && strings.Contains(pgErr.Field('M'), "iceberg_")
}

// noCredentials is errNoStorageCredentials.
type noCredentials struct{}

func (noCredentials) Error() string { return "no credentials for the object store" }

func (noCredentials) Is(target error) bool { return target == ErrStorageCredentials }

// classified reports whether err already wraps one of the sentinels.
func classified(err error) bool {
	for _, known := range []error{ErrBucketNotFound, ErrStorageCredentials, ErrStorageUnreachable,
		ErrCatalogUnreachable, ErrCatalogAuth, ErrOwnedByAnotherCatalog, ErrCatalogFileReplaced} {
		if errors.Is(err, known) {
			return true
		}
	}
	_, hinted := errors.AsType[*setupError](err)
	return hinted
}

// explainCatalog classifies an error of a call to the catalog: nothing
// answering becomes ErrCatalogUnreachable, refused credentials
// ErrCatalogAuth. Callers have ruled out the object store (storageKind).
func explainCatalog(err error) error {
	var pgErr pgdriver.Error
	if isUnreachable(err) || errors.As(err, &pgErr) && pgUnavailable(pgErr.Field('C')) {
		return check(fmt.Errorf("%w (is its server running at that address?): %w", ErrCatalogUnreachable, err), SettingCatalog)
	}
	if hint, settings := catalogAuthHint(err); hint != "" {
		return check(fmt.Errorf("%w (%s): %w", ErrCatalogAuth, hint, err), settings...)
	}
	if hint := catalogSetupHint(err); hint != "" {
		return check(&setupError{err: err, hint: hint}, SettingCatalog)
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

// catalogAuthHint says what to check, and in which settings, when err is a
// REST or PostgreSQL catalog's refusal of the credentials; the hint is
// empty otherwise.
func catalogAuthHint(err error) (string, []Setting) {
	var pgErr pgdriver.Error
	switch {
	case errors.Is(err, rest.ErrUnauthorized), errors.Is(err, rest.ErrForbidden), errors.Is(err, rest.ErrOAuthError),
		errors.Is(err, rest.ErrAuthorizationExpired):
		return "check the bearer token or the OAuth2 client credentials", []Setting{SettingToken, SettingCredential}
	case errors.As(err, &pgErr) && (pgErr.Field('C') == "28P01" || pgErr.Field('C') == "28000"):
		return "check the user and password in the catalog's URL", []Setting{SettingCatalog}
	}
	return "", nil
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
			"InvalidTokenId", "InvalidSecurity", // MinIO's to a session token it did not issue
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
// isTimeout reports a request that got no answer in its time (a server
// that takes the connection and never answers).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

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
