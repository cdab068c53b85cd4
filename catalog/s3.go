package catalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // registers the s3:// (s3a, s3n) file IO
	"github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/defaults"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// S3Config configures S3 access for s3:// warehouses, and for tables on S3
// of a catalog whose warehouse is elsewhere (see Open). Every field is
// optional: empty fields come from aws-sdk-go-v2's standard configuration
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION,
// AWS_PROFILE, the shared config and credentials files, web identity, SSO,
// container and instance roles; AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL for
// an S3-compatible endpoint such as MinIO). Set fields override it.
type S3Config struct {
	// Endpoint is an S3-compatible endpoint URL, e.g. http://minio:9000.
	// Empty means the standard configuration's, else AWS S3.
	Endpoint string
	// Region is the signing region. Empty means the standard
	// configuration's, else us-east-1 when an endpoint is set.
	Region string
	// AccessKeyID, SecretAccessKey and SessionToken are static credentials;
	// when AccessKeyID is empty the SDK's credential chain is used.
	AccessKeyID, SecretAccessKey, SessionToken string
	// PathStyle forces path-style (true) or virtual-hosted-style (false)
	// addressing. Nil means path style with a custom endpoint (MinIO,
	// versitygw) and virtual-hosted style on AWS.
	PathStyle *bool
}

// s3Storage is an S3Config resolved against the standard configuration.
type s3Storage struct {
	// cfg is resolved once per opened catalog, with one HTTP client (see
	// sharedHTTPClient), and handed to iceberg-go's S3 IO through the
	// context (attach).
	cfg      aws.Config
	endpoint string // empty: AWS S3
	// endpointFrom names where the standard configuration took endpoint
	// from (AWS_ENDPOINT_URL_S3, ...); empty when it is Config's or none.
	endpointFrom string
	// credsFrom is the source of the credentials as the SDK names it
	// (aws.Credentials.Source), for the message of a refusal.
	credsFrom string
	pathStyle bool
	// props are the s3.* properties handed to iceberg-go.
	props iceberg.Properties
	log   *slog.Logger
}

// describe names the endpoint for messages.
func (s *s3Storage) describe() string {
	if s.endpoint == "" {
		return "AWS S3 (region " + s.cfg.Region + ")"
	}
	return s.endpoint
}

// endpointNote says, for a message about not reaching the endpoint, where
// it came from: Config's endpoint is named by the error's settings (the
// command line names its flag and where that was set), so only the
// standard configuration's source is named, and without an endpoint, the
// variable that sets one.
func (s *s3Storage) endpointNote() string {
	switch {
	case s.endpointFrom != "":
		return " The endpoint is from " + s.endpointFrom
	case s.endpoint == "":
		return " AWS_ENDPOINT_URL_S3 sets another endpoint too"
	}
	return ""
}

// credentialsToCheck says which credentials a refusal should send the user
// to: where they came from, where it is known (from a deployment
// walk-through: keys of a profile's credentials file were refused with
// "check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY", which were not set).
func (s *s3Storage) credentialsToCheck() string {
	src := s.credsFrom
	switch {
	case src == credentials.StaticCredentialsName:
		return "the S3 access key id and secret access key floe was given"
	case src == config.CredentialsSourceName:
		return "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
	case strings.HasPrefix(src, "SharedConfigCredentials"):
		profile := cmp.Or(os.Getenv("AWS_PROFILE"), os.Getenv("AWS_DEFAULT_PROFILE"), "default")
		file := strings.TrimSpace(strings.TrimPrefix(src, "SharedConfigCredentials:"))
		return fmt.Sprintf("the keys of profile %s in %s", profile, cmp.Or(file, "the AWS shared credentials file"))
	case src != "":
		return "the credentials from " + src
	}
	return "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
}

// endpointSource is implemented by the SDK's environment and shared config
// sources: they know service-specific endpoints (AWS_ENDPOINT_URL_S3, the
// services section of ~/.aws/config).
type endpointSource interface {
	GetServiceBaseEndpoint(ctx context.Context, sdkID string) (string, bool, error)
}

// resolveS3 loads the SDK's standard configuration with c's overrides,
// resolves the credentials once (so that a missing or malformed credential
// setup is an error at start, not at the first flush) and builds the
// properties that configure iceberg-go's S3 IO.
//
// Static credentials (keys from flags, the environment or a credentials
// file) are handed to iceberg-go as s3.access-key-id / s3.secret-access-key
// / s3.session-token. Credentials that expire (assumed roles, SSO, web
// identity, instance and container roles) are not: they come from the
// resolved configuration's credential cache, which refreshes them for as
// long as the sink runs (and where iceberg-go opens storage without that
// configuration, it resolves the same standard chain itself). What it logs
// goes to log.
func resolveS3(ctx context.Context, c S3Config, log *slog.Logger) (*s3Storage, error) {
	opts := []func(*config.LoadOptions) error{config.WithLogger(sdkLogger{log})}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		given, missing := "access key id", "secret access key"
		if c.AccessKeyID == "" {
			given, missing = missing, given
		}
		// The flags replace the SDK's chain whole: a key id from
		// AWS_ACCESS_KEY_ID does not complete a secret given as a flag.
		return nil, fmt.Errorf("S3 credentials: the %s is set and the %s is not: set both (flags, config file or FLOE_S3_* variables; they are not combined with AWS_* variables), or neither to use the AWS_* variables, AWS_PROFILE or a role", given, missing)
	}
	if c.SessionToken != "" && c.AccessKeyID == "" {
		// The token belongs to a key pair; one from AWS_* with a token
		// from a flag went out without it (found by review).
		return nil, errors.New("S3 credentials: the session token is set and the access key id and secret access key are not: set all three (flags, config file or FLOE_S3_* variables; they are not combined with AWS_* variables), or put the token in AWS_SESSION_TOKEN beside AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	if c.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration (AWS_* variables, AWS_PROFILE, ~/.aws/config): %w", err)
	}
	s := &s3Storage{cfg: cfg, endpoint: c.Endpoint, log: log}
	if s.endpoint == "" {
		s.endpoint, s.endpointFrom = configuredEndpoint(ctx, cfg)
	}
	if s.endpoint != "" {
		u, err := url.Parse(s.endpoint)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, &ConfigError{Setting: SettingS3Endpoint, Value: s.endpoint, Want: "a URL such as http://127.0.0.1:9000"}
		}
	}
	if s.cfg.Region == "" {
		if s.endpoint == "" {
			return nil, check(errors.New("no AWS region for S3: set AWS_REGION or a region in ~/.aws/config"), SettingS3Region)
		}
		// S3-compatible servers accept any region; us-east-1 is their default.
		s.cfg.Region = "us-east-1"
	}
	s.cfg.HTTPClient = sharedHTTPClient(s.cfg)
	s.cfg.APIOptions = append(s.cfg.APIOptions, s.withoutResponseIDs)
	s.pathStyle = s.endpoint != ""
	if c.PathStyle != nil {
		s.pathStyle = *c.PathStyle
	}

	creds, err := s.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, check(fmt.Errorf("%w: none of the SDK's sources gave usable AWS credentials for %s (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE): %w",
			errNoStorageCredentials, s.describe(), err), s3Keys...)
	}
	s.props = iceberg.Properties{
		iceio.S3Region:                 s.cfg.Region,
		iceio.S3ForceVirtualAddressing: fmt.Sprint(!s.pathStyle),
	}
	if s.endpoint != "" {
		s.props[iceio.S3EndpointURL] = s.endpoint
	}
	if !creds.CanExpire {
		s.props[iceio.S3AccessKeyID] = creds.AccessKeyID
		s.props[iceio.S3SecretAccessKey] = creds.SecretAccessKey
		if creds.SessionToken != "" {
			s.props[iceio.S3SessionToken] = creds.SessionToken
		}
	}
	s.credsFrom = creds.Source
	s.log.Debug("S3 storage configured", "endpoint", s.describe(), "path_style", s.pathStyle,
		"credentials", creds.Source, "access_key_id", creds.AccessKeyID, "refreshing", creds.CanExpire)
	return s, nil
}

// baseS3 is the configuration under a REST catalog's tables when floe is
// given no S3 setting: the standard configuration as it loads, with the
// shared HTTP client and withoutResponseIDs. Unlike resolveS3 it needs
// neither credentials nor a region: the server may vend both (s3.*
// properties), and iceberg-go applies those over it.
func baseS3(ctx context.Context, log *slog.Logger) (*s3Storage, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(sdkLogger{log}))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration (AWS_* variables, AWS_PROFILE, ~/.aws/config): %w", err)
	}
	s := &s3Storage{cfg: cfg, log: log}
	s.cfg.HTTPClient = sharedHTTPClient(s.cfg)
	s.cfg.APIOptions = append(s.cfg.APIOptions, s.withoutResponseIDs)
	if s.cfg.Credentials != nil {
		s.cfg.Credentials = unvendedCredentials{s.cfg.Credentials}
	}
	return s, nil
}

// unvendedCredentials are the standard configuration's credentials, used
// for a REST catalog's table only where the server vends none. Their
// failure says so, and names remote signing: a server that signs its
// clients' S3 requests itself (s3.remote-signing-enabled) vends none, and
// where it says so beside the table's metadata floe cannot see it (iceberg-go,
// configuring S3 on its own, said it does not support that).
type unvendedCredentials struct{ aws.CredentialsProvider }

func (c unvendedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	creds, err := c.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return creds, fmt.Errorf("no S3 credentials for the table: the REST catalog vended none, and none are set for floe (--s3-* flags, AWS_* variables, AWS_PROFILE); a catalog that signs S3 requests remotely (s3.remote-signing-enabled) is not supported: %w", err)
	}
	return creds, nil
}

// sdkLogger hands the AWS SDK's own log lines to floe's log at debug
// level. The SDK's default logger writes to stderr, so a machine without
// credentials got "SDK ... WARN falling back to IMDSv1: ..." above floe's
// own one-line error, which already says what is wrong.
type sdkLogger struct{ log *slog.Logger }

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	l.log.Debug("AWS SDK: "+fmt.Sprintf(format, v...), "level", string(c))
}

// configuredEndpoint returns the S3 endpoint of the standard configuration:
// a service-specific one (AWS_ENDPOINT_URL_S3, services section of the
// shared config) before the global one (AWS_ENDPOINT_URL, endpoint_url), as
// the SDK's S3 client itself resolves it, and where it came from.
func configuredEndpoint(ctx context.Context, cfg aws.Config) (endpoint, from string) {
	for _, src := range cfg.ConfigSources {
		if es, ok := src.(endpointSource); ok {
			if v, found, err := es.GetServiceBaseEndpoint(ctx, "S3"); err == nil && found && v != "" {
				if _, env := src.(config.EnvConfig); env {
					return v, "AWS_ENDPOINT_URL_S3"
				}
				return v, "the s3 services section of " + sharedConfigName(src)
			}
		}
	}
	if cfg.BaseEndpoint != nil {
		if os.Getenv("AWS_ENDPOINT_URL") == *cfg.BaseEndpoint {
			return *cfg.BaseEndpoint, "AWS_ENDPOINT_URL"
		}
		for _, src := range cfg.ConfigSources {
			if sc, ok := src.(config.SharedConfig); ok {
				return *cfg.BaseEndpoint, "endpoint_url of " + sharedConfigName(sc)
			}
		}
		return *cfg.BaseEndpoint, "endpoint_url of " + sharedConfigName(nil)
	}
	// iceberg-go's own fallback variable.
	if v := os.Getenv("AWS_S3_ENDPOINT"); v != "" {
		return v, "AWS_S3_ENDPOINT"
	}
	return "", ""
}

// sharedConfigName names the AWS shared config file and the profile that
// src, a config.SharedConfig, was read from: "profile floe of the AWS
// shared config /etc/floe/aws-config (AWS_CONFIG_FILE)". Messages said
// "~/.aws/config" whatever AWS_CONFIG_FILE named (deploy review s67).
func sharedConfigName(src any) string {
	file := "~/.aws/config"
	if f := os.Getenv("AWS_CONFIG_FILE"); f != "" {
		file = f + " (AWS_CONFIG_FILE)"
	}
	if sc, ok := src.(config.SharedConfig); ok && sc.Profile != "" {
		return "profile " + sc.Profile + " of the AWS shared config " + file
	}
	return "the AWS shared config " + file
}

// Tuning of the shared transport: iceberg-go's own (io/gocloud/s3), which
// it applies only to the transports it builds itself, when the
// configuration it is given has no HTTP client.
const (
	s3MaxIdleConns        = 256
	s3MaxIdleConnsPerHost = 256
	s3MaxConnsPerHost     = 2048
	s3IdleConnTimeout     = 90 * time.Second
)

// sharedHTTPClient returns the HTTP client every S3 request of one opened
// catalog goes through, built from cfg.HTTPClient, the client the SDK's
// standard configuration built (a BuildableClient carrying the
// AWS_CA_BUNDLE certificates) or nil (the SDK's default transport).
//
// The client is frozen into a plain *http.Client: in every defaults mode
// but legacy (AWS_DEFAULTS_MODE, defaults_mode), the SDK copies a
// BuildableClient's transport, and with it its connection pool, into each
// S3 client built from it, and iceberg-go builds an S3 client every time it
// opens the storage (every data file, commit and catalog load); each copy
// stayed alive, with its goroutines and descriptors, as long as it held
// idle connections. A frozen client is used as it is, so they all share one
// pool. The connect and TLS handshake timeouts the S3 client would have set
// for the defaults mode are set here instead.
func sharedHTTPClient(cfg aws.Config) aws.HTTPClient {
	b, _ := cfg.HTTPClient.(*awshttp.BuildableClient)
	if b == nil {
		b = awshttp.NewBuildableClient()
	}
	b = b.WithTransportOptions(func(t *http.Transport) {
		t.MaxIdleConns = s3MaxIdleConns
		t.MaxIdleConnsPerHost = s3MaxIdleConnsPerHost
		t.MaxConnsPerHost = s3MaxConnsPerHost
		t.IdleConnTimeout = s3IdleConnTimeout
	})
	var mode aws.DefaultsMode
	mode.SetFromString(string(cfg.DefaultsMode))
	if mode == aws.DefaultsModeAuto {
		mode = defaults.ResolveDefaultsModeAuto(cfg.Region, cfg.RuntimeEnvironment)
	}
	// The legacy mode, the default, has no settings (an error).
	if mc, err := defaults.GetModeConfiguration(mode); err == nil {
		b = b.WithDialerOptions(func(d *net.Dialer) {
			if timeout, ok := mc.GetConnectTimeout(); ok {
				d.Timeout = timeout
			}
		}).WithTransportOptions(func(t *http.Transport) {
			if timeout, ok := mc.GetTLSNegotiationTimeout(); ok {
				t.TLSHandshakeTimeout = timeout
			}
		})
	}
	return b.Freeze()
}

// attach returns ctx carrying the resolved configuration for iceberg-go's
// S3 IO, which uses a configuration found in its context instead of
// loading the standard configuration again (reading the shared config
// files and parsing AWS_CA_BUNDLE each time) and keeps its HTTP client. It
// still applies the s3.* properties (endpoint, region, static keys,
// addressing, compat mode) over it, so every setting acts as before.
func (s *s3Storage) attach(ctx context.Context) context.Context {
	return utils.WithAwsConfig(ctx, &s.cfg)
}

// sharesConfig reports whether iceberg-go's S3 IO may be given the
// resolved configuration for storage opened with props. Settings iceberg-go
// applies only while building a configuration of its own (a proxy, a
// connect timeout, remote signing, from --catalog-prop) would be ignored
// with it; then iceberg-go keeps building its own, as it always did.
func sharesConfig(props iceberg.Properties) bool {
	_, proxy := props[iceio.S3ProxyURI]
	_, timeout := props[iceio.S3ConnectTimeout]
	return !proxy && !timeout && !props.GetBool(iceio.S3RemoteSigningEnabled, false)
}

// client returns an S3 client for the resolved configuration that fails
// fast: its only use is the start-up check.
func (s *s3Storage) client() *s3.Client {
	return s3.NewFromConfig(s.cfg, func(o *s3.Options) {
		if s.endpoint != "" {
			o.BaseEndpoint = aws.String(s.endpoint)
		}
		o.UsePathStyle = s.pathStyle
		o.RetryMaxAttempts = 2
	})
}

// check lists at most one object under prefix of bucket, which proves in one
// request that the endpoint answers, the bucket exists and the credentials
// are accepted. A principal that may write but not list is let through
// (iceberg never lists a bucket to write).
func (s *s3Storage) check(ctx context.Context, bucket, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := s.client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{
		Bucket:  aws.String(bucket),
		Prefix:  aws.String(prefix),
		MaxKeys: aws.Int32(1),
	})
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "AccessDenied" {
		s.log.Warn("S3 denied listing the warehouse; going on, since writing needs no listing",
			"bucket", bucket, "endpoint", s.describe())
		return nil
	}
	return s.explain(err, bucket)
}

// explain classifies an S3 error: a missing bucket, rejected credentials or
// an unreachable endpoint become errors wrapping ErrBucketNotFound,
// ErrStorageCredentials or ErrStorageUnreachable with a hint; other errors
// are returned as they are.
func (s *s3Storage) explain(err error, bucket string) error {
	where := s.describe()
	kind := storageKind(err)
	if bucket == "" && kind != ErrStorageUnreachable {
		// The warehouse is not on S3, so the table's bucket is not known
		// here; the error names the object.
		return Explain(err)
	}
	switch kind {
	case ErrBucketNotFound:
		// With a custom endpoint (MinIO, versitygw, Ceph) the aws CLI must
		// be told it: older ones (Debian 12's 2.9) ignore
		// AWS_ENDPOINT_URL_S3, and a bare 'aws s3 mb' asks AWS.
		mb := "aws s3 mb s3://" + bucket
		if s.endpoint != "" {
			mb = "aws --endpoint-url " + s.endpoint + " s3 mb s3://" + bucket
		}
		return check(fmt.Errorf("%w: bucket %q at %s (create it, e.g. '%s', or write to another bucket): %w",
			ErrBucketNotFound, bucket, where, mb, err), SettingWarehouse)
	case ErrStorageCredentials:
		return check(fmt.Errorf("%w: %s refused access to bucket %q: check %s and that the endpoint and region are right: %w",
			ErrStorageCredentials, where, bucket, s.credentialsToCheck(), err), SettingS3AccessKeyID, SettingS3SecretAccessKey, SettingS3Endpoint, SettingS3Region)
	case ErrStorageUnreachable:
		return check(fmt.Errorf("%w: cannot reach %s (is the server running there?%s): %w",
			ErrStorageUnreachable, where, s.endpointNote(), err), SettingS3Endpoint)
	}
	if notS3Answer(err) {
		// Most often an endpoint that is another server: a broker's
		// port, a schema registry's.
		return check(fmt.Errorf("S3 bucket %q at %s: %w (is that an S3 server?%s)", bucket, where, err, s.endpointNote()), SettingS3Endpoint)
	}
	return fmt.Errorf("S3 bucket %q at %s: %w", bucket, where, err)
}

// notS3Answer reports an S3 request that got no S3 answer: no S3 error
// code (only the HTTP status's, which the SDK makes of a 404 or 400
// without an S3 body), a body that is no S3 document, or no answer in
// time. An S3 error code (SlowDown, InvalidBucketName, a redirect) is an
// S3 server's.
func notS3Answer(err error) bool {
	var api smithy.APIError
	var body *smithy.DeserializationError
	switch {
	case errors.As(err, &api):
		switch api.ErrorCode() {
		case "", "NotFound", "BadRequest", "MethodNotAllowed":
			return true
		}
		return false
	case errors.As(err, &body):
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// splitS3 splits s3://bucket/prefix (or s3a://, s3n://) into bucket and
// prefix; ok is false for other schemes.
func splitS3(uri string) (bucket, prefix string, ok bool) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", "", false
	}
	switch u.Scheme {
	case "s3", "s3a", "s3n":
	default:
		return "", "", false
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), true
}
