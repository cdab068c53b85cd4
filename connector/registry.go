package connector

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"
)

// DefaultRegistryTimeout bounds one request to the schema registry. A
// registry answers a schema lookup in milliseconds; one that takes longer
// is treated as unavailable and the sink retries.
const DefaultRegistryTimeout = 10 * time.Second

// RegistryConfig says how to reach a Confluent-compatible schema registry
// (Confluent Schema Registry, Redpanda, Karapace, Apicurio's ccompat API).
// floe sink's --schema-registry* flags fill it.
type RegistryConfig struct {
	// URL is the registry's base URL, http:// or https://; several,
	// comma-separated, are tried in order when one cannot be reached (as
	// Confluent clients' schema.registry.url).
	URL string
	// User and Password are HTTP basic auth credentials (Confluent Cloud:
	// the API key and secret).
	User, Password string
	// Token is a bearer token; it excludes User and Password.
	Token string
	// CAFile is a PEM file of the CAs to trust for an https registry
	// instead of the system's roots (a private CA, a self-signed cert).
	CAFile string
	// Timeout bounds each request; zero means DefaultRegistryTimeout.
	Timeout time.Duration
}

// SchemaType is the type of a registered schema, as the registry names it.
type SchemaType string

// The schema types a Confluent-compatible registry holds.
const (
	SchemaAvro     SchemaType = "AVRO"
	SchemaProtobuf SchemaType = "PROTOBUF"
	SchemaJSON     SchemaType = "JSON" // JSON Schema
)

// Schema is a registered schema with everything a decoder needs: its text
// and the text of every schema it references, directly or through other
// references.
type Schema struct {
	ID   int
	Type SchemaType
	Text string
	// References are the schemas this one references, resolved
	// recursively, each subject version once, every schema after the
	// schemas it references: a decoder can parse them in this order (Avro
	// named types, .proto imports, JSON Schema $refs) and then Text.
	References []Reference
}

// Reference is a schema that another one references.
type Reference struct {
	// Name is how the referencing schema names it: an Avro full name, a
	// .proto import path, a JSON Schema $ref URL.
	Name    string
	Subject string
	Version int
	ID      int
	Type    SchemaType
	Text    string
}

// RegistryValue is a payload in the schema registry wire format, split into
// its schema and the encoded value.
type RegistryValue struct {
	// Schema is the writer's schema; it is shared by every value written
	// with it and must not be modified.
	Schema *Schema
	// Indexes are the Protobuf message indexes: the path to the message
	// type in the .proto, [0] being its first top-level message, [1, 0]
	// the first message nested in the second. Nil for Avro and JSON Schema.
	Indexes []int
	// Data is the encoded value after the header; it aliases the payload.
	Data []byte
}

// Registry reads schemas from a Confluent-compatible schema registry and
// splits payloads of its wire format. Schemas are cached by ID for the
// life of the Registry: a registry never changes the schema of an ID, so
// each is fetched once however many records carry it. It is safe for
// concurrent use.
type Registry struct {
	url    string // the configured URL(s), for messages
	client *sr.Client
	calls  singleflight.Group // concurrent first lookups of one ID share one fetch

	mu      sync.RWMutex
	schemas map[int]*Schema
}

// NewRegistry checks cfg and builds a Registry. It reads cfg.CAFile but
// talks to no server: Pipelines.Check and replay.Run call Check before
// they create anything, and a registry that goes away later is a transient
// condition a sink retries.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if cfg.URL == "" {
		return nil, errors.New("schema registry: no URL given (--schema-registry)")
	}
	var urls []string
	https := false
	// Credentials in the URL (https://KEY:SECRET@host, Confluent's
	// basic.auth.credentials.source=URL) are taken out of it: they become
	// basic auth, and the URLs floe prints and hands to the client (whose
	// errors quote them) carry none.
	var inURL *url.Userinfo
	for u := range strings.SplitSeq(cfg.URL, ",") {
		u = strings.TrimSpace(u)
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("schema registry: --schema-registry %q: want http://HOST:PORT or https://HOST:PORT", withoutUserinfo(u))
		}
		if p.User != nil {
			if inURL != nil && inURL.String() != p.User.String() {
				return nil, errors.New("schema registry: the --schema-registry URLs carry different credentials: give one set, with --schema-registry-user and --schema-registry-password")
			}
			inURL, p.User = p.User, nil
		}
		https = https || p.Scheme == "https"
		urls = append(urls, p.String())
	}
	if inURL != nil {
		if cfg.User != "" || cfg.Token != "" {
			return nil, errors.New("schema registry: credentials in the --schema-registry URL and in --schema-registry-user or --schema-registry-token: give them one way")
		}
		cfg.User = inURL.Username()
		cfg.Password, _ = inURL.Password()
	}
	cfg.URL = strings.Join(urls, ",")
	switch {
	case cfg.Token != "" && (cfg.User != "" || cfg.Password != ""):
		return nil, errors.New("schema registry: give either --schema-registry-token or --schema-registry-user and --schema-registry-password, not both")
	case cfg.Password != "" && cfg.User == "":
		return nil, errors.New("schema registry: --schema-registry-password without --schema-registry-user")
	case cfg.CAFile != "" && !https:
		return nil, fmt.Errorf("schema registry: --schema-registry-ca applies to https only, and %s is plain http", cfg.URL)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("schema registry: --schema-registry-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("schema registry: --schema-registry-ca %s holds no PEM certificate", cfg.CAFile)
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultRegistryTimeout
	}
	opts := []sr.ClientOpt{
		sr.URLs(urls...),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: timeout}),
		sr.UserAgent("floe"),
	}
	if cfg.User != "" {
		opts = append(opts, sr.BasicAuth(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, sr.BearerToken(cfg.Token))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", cfg.URL, err)
	}
	return &Registry{url: cfg.URL, client: cl, schemas: map[int]*Schema{}}, nil
}

// Check asks the registry for its subjects, so that a run finds before it
// creates anything that a schema registry answers at the URL with these
// credentials. A registry that does not answer is a
// *RegistryUnavailableError, rejected credentials (HTTP 401) a
// *RegistryAuthError; a server that is no schema registry, or speaks no
// TLS to https, is an error naming what to check. HTTP 403 passes: the
// registry knows the credentials, and a least-privilege key may read
// schemas by ID without listing subjects.
func (r *Registry) Check(ctx context.Context) error {
	_, err := r.client.Subjects(ctx)
	if err == nil {
		return nil
	}
	err = r.explain(err, "its subjects", &UnknownSchemaError{})
	if auth, ok := errors.AsType[*RegistryAuthError](err); ok && auth.StatusCode == http.StatusForbidden {
		return nil
	}
	if _, down := errors.AsType[*RegistryUnavailableError](err); down {
		// At start a registry that does not answer is most often a wrong
		// address, not an outage.
		return fmt.Errorf("%w (checked before creating anything; nothing was created); check --schema-registry", err)
	}
	return fmt.Errorf("%w (checked before creating anything; nothing was created)", err)
}

// Resolve splits payload, a record key or value in the schema registry
// wire format (magic byte 0, the schema ID as 4 big-endian bytes, for
// Protobuf the message indexes, then the encoded value), and looks up its
// schema. A null value (a tombstone) has no schema: callers handle it
// before.
//
// Errors callers branch on: *WireError (the payload is not in the wire
// format) and *UnknownSchemaError (the registry does not have its schema)
// say that this record cannot be decoded, whatever happens later: a sink
// dead-letters it. *RegistryUnavailableError says that the registry could
// not answer now: retry, dead-letter nothing. *RegistryAuthError and any
// other error need a person: stop.
func (r *Registry) Resolve(ctx context.Context, payload []byte) (RegistryValue, error) {
	var h sr.ConfluentHeader
	id, rest, err := h.DecodeID(payload)
	if err != nil {
		return RegistryValue{}, wireHeaderError(payload)
	}
	s, err := r.Schema(ctx, id)
	if err != nil {
		return RegistryValue{}, err
	}
	v := RegistryValue{Schema: s, Data: rest}
	if s.Type == SchemaProtobuf {
		if v.Indexes, v.Data, err = decodeIndexes(rest); err != nil {
			return RegistryValue{}, err
		}
	}
	return v, nil
}

// wireHeaderError says why payload has no wire-format header.
func wireHeaderError(payload []byte) *WireError {
	switch {
	case len(payload) == 0:
		return &WireError{Reason: "the payload is empty"}
	case payload[0] == '{' || payload[0] == '[' || payload[0] == '"':
		// Plain JSON text, written without a registry serializer: say so,
		// and what would do (found by review).
		return &WireError{Reason: fmt.Sprintf("the first byte is 0x%02x (%q), not the magic byte 0: the record looks like plain JSON text, written without a schema-registry serializer; its producer should use one (KafkaAvroSerializer, KafkaJsonSchemaSerializer, ...), or a topic of plain JSON is sunk with --value json", payload[0], rune(payload[0]))}
	case payload[0] != 0:
		return &WireError{Reason: fmt.Sprintf("the first byte is 0x%02x, not the magic byte 0: the record was not written with a schema-registry serializer", payload[0])}
	}
	return &WireError{Reason: fmt.Sprintf("%d bytes are too short for the 5-byte header (magic byte and schema ID)", len(payload))}
}

// decodeIndexes reads the Protobuf message indexes that follow the schema
// ID: a zigzag varint count (0 meaning the single index [0]), then that
// many zigzag varint indexes. Each error names the framing problem and its
// common cause (missingIndexes).
func decodeIndexes(b []byte) ([]int, []byte, error) {
	var h sr.ConfluentHeader
	// Each index takes at least one byte, so a count above len(b) is
	// malformed; bounding it here keeps a corrupt count from allocating.
	idx, rest, err := h.DecodeIndex(b, len(b))
	var reason string
	switch {
	case err == nil:
	case len(b) == 0:
		reason = "the Protobuf message indexes are missing (nothing follows the schema ID)"
	case errors.Is(err, sr.ErrNotRegistered): // DecodeIndex's word for a count above the bound
		reason = "malformed Protobuf message indexes: more than the payload's bytes can hold"
	case errors.Is(err, sr.ErrBadHeader):
		reason = "malformed Protobuf message indexes: a negative count"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		reason = "malformed Protobuf message indexes: cut short"
	default:
		reason = fmt.Sprintf("malformed Protobuf message indexes: %v", err)
	}
	for _, i := range idx {
		if i < 0 && reason == "" {
			reason = fmt.Sprintf("negative Protobuf message index %d (in %v, read where the message-index array should be)", i, idx)
		}
	}
	if reason != "" {
		return nil, nil, &WireError{Reason: reason + "; " + missingIndexes}
	}
	return idx, rest, nil
}

// missingIndexes is what malformed or impossible Protobuf message indexes
// most often mean: a producer that leaves the array out, so that the
// message's own first bytes are read as indexes.
const missingIndexes = "Confluent's Protobuf framing puts a message-index array between the schema ID and the message " +
	"(the single byte 0x00 for the schema's first message); producers that leave it out, such as " +
	"@kafkajs/confluent-schema-registry (its issue #248), write the message right after the schema ID: " +
	"make the producer write the indexes (for the first message, insert 0x00 after the 5-byte header)"

// Schema returns the schema registered under id, with its references,
// from the cache or the registry. Errors are Resolve's, but for
// *WireError.
func (r *Registry) Schema(ctx context.Context, id int) (*Schema, error) {
	r.mu.RLock()
	s, ok := r.schemas[id]
	r.mu.RUnlock()
	if ok {
		return s, nil
	}
	// The first lookups of an ID, from several partitions at once, share
	// one fetch. It runs without the callers' cancellation, so that one
	// caller stopping does not fail the others (the client's timeout
	// bounds it), and each caller stops waiting when its own ctx ends.
	ch := r.calls.DoChan(strconv.Itoa(id), func() (any, error) {
		s, err := r.fetch(context.WithoutCancel(ctx), id)
		if err == nil {
			r.mu.Lock()
			r.schemas[id] = s
			r.mu.Unlock()
		}
		return s, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*Schema), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("schema registry %s: schema %d: %w", r.url, id, ctx.Err())
	}
}

// fetch reads schema id and resolves its references.
func (r *Registry) fetch(ctx context.Context, id int) (*Schema, error) {
	got, err := r.client.SchemaByID(ctx, id)
	if err != nil {
		return nil, r.explain(err, fmt.Sprintf("schema %d", id), &UnknownSchemaError{ID: id})
	}
	s := &Schema{ID: id, Type: schemaType(got.Type), Text: got.Schema}
	seen := map[sr.SchemaReference]bool{}
	if err := r.resolveRefs(ctx, id, got.References, seen, &s.References); err != nil {
		return nil, err
	}
	return s, nil
}

// resolveRefs appends the schemas refs name to out, depth first, each
// after its own references; seen holds the subject versions already
// appended (or being resolved, which ends a cycle).
func (r *Registry) resolveRefs(ctx context.Context, id int, refs []sr.SchemaReference, seen map[sr.SchemaReference]bool, out *[]Reference) error {
	for _, ref := range refs {
		key := sr.SchemaReference{Subject: ref.Subject, Version: ref.Version}
		if seen[key] {
			continue
		}
		seen[key] = true
		// A referenced version soft-deleted since still decodes the
		// records written with the schemas that reference it.
		got, err := r.client.SchemaByVersion(sr.WithParams(ctx, sr.ShowDeleted), ref.Subject, ref.Version)
		if err != nil {
			what := fmt.Sprintf("schema %d: reference %q (subject %s version %d)", id, ref.Name, ref.Subject, ref.Version)
			return r.explain(err, what, &UnknownSchemaError{ID: id, Reference: ref.Name, Subject: ref.Subject, Version: ref.Version})
		}
		if err := r.resolveRefs(ctx, id, got.References, seen, out); err != nil {
			return err
		}
		*out = append(*out, Reference{
			Name: ref.Name, Subject: ref.Subject, Version: ref.Version,
			ID: got.ID, Type: schemaType(got.Type), Text: got.Schema.Schema,
		})
	}
	return nil
}

func schemaType(t sr.SchemaType) SchemaType {
	switch t {
	case sr.TypeProtobuf:
		return SchemaProtobuf
	case sr.TypeJSON:
		return SchemaJSON
	}
	return SchemaAvro
}

// explain classifies a failed request for what (a schema or a reference):
// notFound when the registry says it has no such schema, subject or
// version; *RegistryAuthError for rejected credentials;
// *RegistryUnavailableError when nothing answered or the registry failed
// (5xx, throttling, a timeout, a cut connection); a plain error naming the
// registry and what to check otherwise.
func (r *Registry) explain(err error, what string, notFound *UnknownSchemaError) error {
	var resp *sr.ResponseError
	if errors.As(err, &resp) {
		switch code := resp.StatusCode; {
		case code == http.StatusNotFound && sr.IsNotFoundError(resp.ErrorCode):
			notFound.Registry = r.url
			notFound.Err = err
			return notFound
		case code == http.StatusUnauthorized || code == http.StatusForbidden:
			return &RegistryAuthError{Registry: r.url, StatusCode: code, Err: err}
		case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
			return &RegistryUnavailableError{Registry: r.url, What: what, Err: err}
		case code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
			// A 404 without the registry's error code is a server that is
			// no schema registry at this path: taking it for an unknown
			// schema would dead-letter every record. A 405 is a registry
			// path given as the base (…/subjects, found by a docs check).
			return fmt.Errorf("schema registry %s: %s: HTTP %d without a registry error code (is --schema-registry the registry's base URL?): %w", r.url, what, code, err)
		}
		return fmt.Errorf("schema registry %s: %s: HTTP %d: %w", r.url, what, resp.StatusCode, err)
	}
	if hint := tlsHint(err); hint != "" {
		return fmt.Errorf("schema registry %s: %s: %s: %w", r.url, what, hint, err)
	}
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		netErr net.Error
		opErr  *net.OpError
		dnsErr *net.DNSError
	)
	switch {
	case errors.As(err, &syntax), errors.As(err, &typ):
		return fmt.Errorf("schema registry %s: %s: the answer is not a schema registry's (check --schema-registry): %w", r.url, what, err)
	case errors.As(err, &opErr), errors.As(err, &dnsErr), errors.As(err, &netErr) && netErr.Timeout(),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return &RegistryUnavailableError{Registry: r.url, What: what, Err: err}
	}
	return fmt.Errorf("schema registry %s: %s: %w", r.url, what, err)
}

// tlsHint says what to check when err is a failed TLS handshake, and is
// empty otherwise. These need a person: retrying cannot fix them.
func tlsHint(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &host):
		return "the registry's certificate is for another host name (check --schema-registry)"
	case errors.As(err, &invalid):
		return "the registry's certificate is invalid (expired, or not for a server)"
	case errors.As(err, &unknownCA), errors.As(err, &verify):
		return "the registry's certificate is not trusted (give its CA with --schema-registry-ca)"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the server does not speak TLS (use http:// in --schema-registry)"
	}
	return ""
}

// WireError reports a payload that is not in the schema registry wire
// format (no magic byte, too short, malformed Protobuf message indexes):
// the record cannot be decoded, so a sink dead-letters it with Reason.
type WireError struct {
	Reason string
}

func (e *WireError) Error() string { return "not in the schema registry wire format: " + e.Reason }

// UnknownSchemaError reports a schema ID the registry does not have
// (error code 40403), or a schema whose reference names a subject or
// version it does not have: the records written with it cannot be
// decoded, so a sink dead-letters them.
type UnknownSchemaError struct {
	Registry string
	ID       int
	// Reference, Subject and Version name the missing reference, when the
	// schema itself was found.
	Reference string
	Subject   string
	Version   int
	Err       error
}

func (e *UnknownSchemaError) Error() string {
	if e.Subject != "" {
		return fmt.Sprintf("schema registry %s: schema %d references %q, subject %s version %d, which the registry does not have: %v",
			e.Registry, e.ID, e.Reference, e.Subject, e.Version, e.Err)
	}
	return fmt.Sprintf("schema registry %s does not have schema %d: %v", e.Registry, e.ID, e.Err)
}

func (e *UnknownSchemaError) Unwrap() error { return e.Err }

// RegistryUnavailableError reports a registry that could not answer: no
// connection, a timeout, a cut connection, a server error (5xx) or
// throttling (429). It is transient: a sink dead-letters nothing for it,
// and retries from the ledger (catalog.IsTransient accepts it).
type RegistryUnavailableError struct {
	Registry string
	// What names what was being read: "schema 7", or one of its references.
	What string
	Err  error
}

func (e *RegistryUnavailableError) Error() string {
	return fmt.Sprintf("schema registry %s unavailable, reading %s: %v", e.Registry, e.What, e.Err)
}

func (e *RegistryUnavailableError) Unwrap() error { return e.Err }

// Transient says that the error may pass on its own (see catalog.IsTransient).
func (e *RegistryUnavailableError) Transient() bool { return true }

// RegistryAuthError reports credentials the registry rejected (HTTP 401:
// missing or wrong; 403: not allowed to read schemas). A person must fix
// them: it is never transient.
type RegistryAuthError struct {
	Registry   string
	StatusCode int
	Err        error
}

func (e *RegistryAuthError) Error() string {
	return fmt.Sprintf("schema registry %s rejected the credentials (HTTP %d): check --schema-registry-user and --schema-registry-password (FLOE_SCHEMA_REGISTRY_PASSWORD) or --schema-registry-token: %v",
		e.Registry, e.StatusCode, e.Err)
}

func (e *RegistryAuthError) Unwrap() error { return e.Err }

// Transient says that the error needs a person (see catalog.IsTransient):
// an HTTP error of a server, it must not pass for one that may heal.
func (e *RegistryAuthError) Transient() bool { return false }

// withoutUserinfo is a URL that url.Parse refused, with what may be
// credentials (between "://" and the last "@") left out, for a message.
func withoutUserinfo(u string) string {
	i := strings.Index(u, "://")
	j := strings.LastIndex(u, "@")
	if i < 0 || j < i {
		return u
	}
	return u[:i+3] + "***@" + u[j+1:]
}
