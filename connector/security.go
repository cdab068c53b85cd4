package connector

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// SASL mechanisms Security accepts, as Kafka names them.
const (
	MechanismPlain       = "PLAIN"
	MechanismScram256    = "SCRAM-SHA-256"
	MechanismScram512    = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
	MechanismMSKIAM      = "AWS_MSK_IAM"
)

// Mechanisms lists the SASL mechanisms, for usage texts.
var Mechanisms = []string{MechanismPlain, MechanismScram256, MechanismScram512, MechanismOAuthBearer, MechanismMSKIAM}

// Settings of Security that errors name.
const (
	SettingTLS           Setting = "Security.TLS"
	SettingTLSCA         Setting = "Security.TLSCAFile"
	SettingTLSCert       Setting = "Security.TLSCertFile"
	SettingTLSKey        Setting = "Security.TLSKeyFile"
	SettingTLSServerName Setting = "Security.TLSServerName"
	SettingMechanism     Setting = "Security.Mechanism"
	SettingUser          Setting = "Security.User"
	SettingPassword      Setting = "Security.Password"
	SettingToken         Setting = "Security.Token"
	SettingTokenURL      Setting = "Security.TokenURL"
)

// Security says how floe's Kafka clients authenticate and encrypt: TLS
// (with the system's roots or a CA file, optionally a client certificate
// for mutual TLS) and one SASL mechanism. The zero value is plaintext
// without authentication. Every client floe makes of a cluster (the admin
// connection of Dial and each sink's consumer) uses the options Opts
// builds from it.
type Security struct {
	// TLS encrypts connections. TLSCAFile, TLSCertFile and TLSServerName
	// imply it.
	TLS bool
	// TLSCAFile is a PEM file of the CAs that sign the brokers'
	// certificates; empty means the system's roots.
	TLSCAFile string
	// TLSCertFile and TLSKeyFile are the PEM client certificate and key of
	// mutual TLS; both or neither.
	TLSCertFile, TLSKeyFile string
	// TLSServerName is the name the brokers' certificates must carry when
	// it is not the host of the address dialled.
	TLSServerName string
	// Mechanism is the SASL mechanism (one of Mechanisms, in any case);
	// empty means no SASL.
	Mechanism string
	// User and Password authenticate PLAIN and SCRAM; with OAUTHBEARER and
	// TokenURL they are the OAuth client id and secret.
	User, Password string
	// Token is OAUTHBEARER's static bearer token.
	Token string
	// TokenURL is an OAuth 2 token endpoint from which OAUTHBEARER gets its
	// token with the client-credentials grant (User, Password, Scope).
	TokenURL string
	// Scope is the OAuth scope asked of TokenURL; empty asks for none.
	Scope string
}

func (s Security) useTLS() bool {
	return s.TLS || s.TLSCAFile != "" || s.TLSCertFile != "" || s.TLSServerName != ""
}

// Principal is whom the brokers authorise s as, in Kafka's "User:NAME"
// form when it is known from the configuration ("" otherwise: OAUTHBEARER
// and AWS_MSK_IAM principals are the broker's to derive).
func (s Security) Principal() string {
	switch strings.ToUpper(s.Mechanism) {
	case MechanismPlain, MechanismScram256, MechanismScram512:
		return "User:" + s.User
	}
	return ""
}

// Opts returns the franz-go options of s: a TLS dialer and a SASL
// mechanism. ctx bounds nothing here; it is the context of credential
// refreshes (OAuth tokens, the AWS credential chain), so it should live as
// long as the clients. Errors name the setting to fix and never hold a
// secret.
func (s Security) Opts(ctx context.Context) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if s.useTLS() {
		tc, err := s.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s.Mechanism != "" {
		m, err := s.mechanism(ctx)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (s Security) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLSServerName}
	if s.TLSCAFile != "" {
		pem, err := os.ReadFile(s.TLSCAFile)
		if err != nil {
			return nil, &ConfigError{Setting: SettingTLSCA, Value: s.TLSCAFile, Want: "a readable PEM file of CA certificates (" + errText(err) + ")"}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &ConfigError{Setting: SettingTLSCA, Value: s.TLSCAFile, Want: "a PEM file of CA certificates (it holds none)"}
		}
	}
	switch {
	case s.TLSCertFile == "" && s.TLSKeyFile != "":
		return nil, &ConfigError{Setting: SettingTLSCert, Want: "the client certificate of the key " + s.TLSKeyFile + " (mutual TLS takes both)"}
	case s.TLSCertFile != "" && s.TLSKeyFile == "":
		return nil, &ConfigError{Setting: SettingTLSKey, Want: "the private key of the certificate " + s.TLSCertFile + " (mutual TLS takes both)"}
	case s.TLSCertFile != "":
		// Each file read on its own first, so that an error names the file
		// at fault: tls.LoadX509KeyPair's were all reported as the
		// certificate's, a missing key file too ("--kafka-tls-cert
		// cert.pem: ... (no such file or directory)").
		certPEM, err := os.ReadFile(s.TLSCertFile)
		if err != nil {
			return nil, &ConfigError{Setting: SettingTLSCert, Value: s.TLSCertFile, Want: "a readable PEM client certificate (" + errText(err) + ")"}
		}
		keyPEM, err := os.ReadFile(s.TLSKeyFile)
		if err != nil {
			return nil, &ConfigError{Setting: SettingTLSKey, Value: s.TLSKeyFile, Want: "a readable PEM private key (" + errText(err) + ")"}
		}
		certBlock, keyBlock := pemHolds(certPEM, "CERTIFICATE"), pemHolds(keyPEM, "PRIVATE KEY")
		switch {
		case !certBlock && !keyBlock && pemHolds(certPEM, "PRIVATE KEY") && pemHolds(keyPEM, "CERTIFICATE"):
			return nil, &ConfigError{Setting: SettingTLSCert, Value: s.TLSCertFile,
				Want: "a PEM client certificate: it holds a private key and the key file " + s.TLSKeyFile + " a certificate (the two files are switched)"}
		case !certBlock:
			return nil, &ConfigError{Setting: SettingTLSCert, Value: s.TLSCertFile, Want: "a PEM client certificate (it holds none)"}
		case !keyBlock:
			return nil, &ConfigError{Setting: SettingTLSKey, Value: s.TLSKeyFile, Want: "a PEM private key (it holds none)"}
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil && encryptedKey(s.TLSKeyFile) {
			return nil, &ConfigError{Setting: SettingTLSKey, Value: s.TLSKeyFile,
				Want: "an unencrypted PEM private key: floe does not read encrypted keys (ssl.key.password); decrypt it with openssl pkey -in KEY -out KEY.pem, and keep that file private"}
		}
		if err != nil {
			return nil, &ConfigError{Setting: SettingTLSCert, Value: s.TLSCertFile,
				Want: "a PEM client certificate matching the key " + s.TLSKeyFile + " (" + errText(err) + ")"}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// pemHolds reports whether data holds a PEM block whose type ends with
// typ ("CERTIFICATE"; "PRIVATE KEY" for PKCS#8, "RSA PRIVATE KEY", "EC
// PRIVATE KEY" and "ENCRYPTED PRIVATE KEY").
func pemHolds(data []byte, typ string) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if strings.HasSuffix(b.Type, typ) {
			return true
		}
	}
}

// encryptedKey reports whether the PEM file at path holds an encrypted
// private key (PKCS#8 "ENCRYPTED PRIVATE KEY", or a legacy one with a
// Proc-Type: 4,ENCRYPTED header).
func encryptedKey(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && (strings.Contains(string(b), "ENCRYPTED PRIVATE KEY") || strings.Contains(string(b), "Proc-Type: 4,ENCRYPTED"))
}

// errText is err's message without the path that os errors repeat.
func errText(err error) string {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

func (s Security) mechanism(ctx context.Context) (sasl.Mechanism, error) {
	needUser := func() error {
		if s.User == "" {
			return &ConfigError{Setting: SettingUser, Want: "the user that " + s.Mechanism + " authenticates"}
		}
		if s.Password == "" {
			return &ConfigError{Setting: SettingPassword, Want: "the password of " + s.Mechanism + " user " + s.User}
		}
		return nil
	}
	switch strings.ToUpper(s.Mechanism) {
	case MechanismPlain:
		if err := needUser(); err != nil {
			return nil, err
		}
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case MechanismScram256, MechanismScram512:
		if err := needUser(); err != nil {
			return nil, err
		}
		a := scram.Auth{User: s.User, Pass: s.Password}
		if strings.EqualFold(s.Mechanism, MechanismScram256) {
			return a.AsSha256Mechanism(), nil
		}
		return a.AsSha512Mechanism(), nil
	case MechanismOAuthBearer:
		return s.oauthMechanism(ctx)
	case MechanismMSKIAM:
		// The standard chain: environment, shared config and credentials
		// files, SSO, web identity, container and instance roles.
		cfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, &CheckError{Settings: []Setting{SettingMechanism}, Err: fmt.Errorf("AWS_MSK_IAM: load the AWS configuration: %w", err)}
		}
		return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
			c, err := cfg.Credentials.Retrieve(ctx)
			if err != nil {
				return aws.Auth{}, fmt.Errorf("AWS_MSK_IAM: no AWS credentials (set AWS_PROFILE, AWS_ACCESS_KEY_ID or a role): %w", err)
			}
			return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "floe"}, nil
		}), nil
	}
	return nil, &ConfigError{Setting: SettingMechanism, Value: s.Mechanism, Want: strings.Join(Mechanisms, ", ")}
}

// oauthMechanism is OAUTHBEARER with a static token or one from a token
// endpoint, fetched on first use and again when it expires (the client
// re-authenticates with the new one when the broker's session ends).
func (s Security) oauthMechanism(ctx context.Context) (sasl.Mechanism, error) {
	switch {
	case s.Token != "" && s.TokenURL != "":
		return nil, &ConfigError{Setting: SettingTokenURL, Value: s.TokenURL, Want: "either a static token or a token endpoint, not both"}
	case s.Token != "":
		return oauth.Auth{Token: s.Token}.AsMechanism(), nil
	case s.TokenURL == "":
		return nil, &ConfigError{Setting: SettingToken, Want: "an OAUTHBEARER token, or a token endpoint URL with a client id and secret"}
	case s.User == "":
		return nil, &ConfigError{Setting: SettingUser, Want: "the OAuth client id of token endpoint " + s.TokenURL}
	case s.Password == "":
		return nil, &ConfigError{Setting: SettingPassword, Want: "the OAuth client secret of client " + s.User}
	}
	cc := clientcredentials.Config{ClientID: s.User, ClientSecret: s.Password, TokenURL: s.TokenURL}
	if s.Scope != "" {
		cc.Scopes = strings.Fields(s.Scope)
	}
	// franz-go authenticates without a deadline: a token endpoint that
	// takes the request and never answers would hold the connection for
	// ever. The HTTP client bounds each fetch, and a fetch outliving the
	// connection's context is given up (it ends at the client's timeout).
	hc := &http.Client{Timeout: tokenTimeout}
	src := oauth2.ReuseTokenSource(nil, cc.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, hc)))
	url := s.TokenURL
	return oauth.Oauth(func(actx context.Context) (oauth.Auth, error) {
		type fetched struct {
			tok *oauth2.Token
			err error
		}
		got := make(chan fetched, 1)
		go func() {
			tok, err := src.Token()
			got <- fetched{tok, err}
		}()
		var tok *oauth2.Token
		var err error
		select {
		case f := <-got:
			tok, err = f.tok, f.err
		case <-actx.Done():
			err = actx.Err()
		}
		if err != nil {
			return oauth.Auth{}, &CheckError{Settings: []Setting{SettingTokenURL, SettingUser, SettingPassword},
				Err: fmt.Errorf("get an OAUTHBEARER token from %s: %s", url, tokenErrText(err))}
		}
		return oauth.Auth{Token: tok.AccessToken}, nil
	}), nil
}

// tokenTimeout bounds a fetch from an OAUTHBEARER token endpoint.
const tokenTimeout = 30 * time.Second

// tokenErrText is a token endpoint's error without the response body,
// which some endpoints fill with the request they refused.
func tokenErrText(err error) string {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
		if re.ErrorCode != "" {
			return fmt.Sprintf("the endpoint answered %s (%s)", re.Response.Status, re.ErrorCode)
		}
		return "the endpoint answered " + re.Response.Status
	}
	return err.Error()
}

// explainDial turns a failure of the first request to the brokers into an
// error naming the cause and the settings to fix, or nil when it is none
// that security explains (the brokers are down or unreachable).
func (s Security) explainDial(err error) error {
	if ce, ok := errors.AsType[*CheckError](err); ok {
		return ce // the mechanism's own, e.g. a token endpoint's refusal
	}
	if ce := s.refusal(err); ce != nil {
		return ce
	}
	check := func(msg string, settings ...Setting) error {
		return &CheckError{Settings: settings, Err: fmt.Errorf("%s: %w", msg, err)}
	}
	var (
		header tls.RecordHeaderError
		eof    *kgo.ErrFirstReadEOF
		netErr net.Error
	)
	// franz-go tells where a connection was closed only in its message:
	// right after the dial (a TLS hello to a plaintext port), during the
	// first request (a plaintext request to a TLS port) or at the first
	// request after it (SASL missing).
	eofAt := func(words string) bool { return eof != nil && strings.Contains(eof.Error(), words) }
	errors.As(err, &eof)
	switch {
	case errors.As(err, &header), eofAt("after a dial"):
		return check("the brokers do not speak TLS on this port (a plaintext listener?)", SettingTLS)
	case eofAt("api versions"), !s.useTLS() && strings.Contains(err.Error(), "tls alert"):
		// A private CA is the rule where TLS is required and was left
		// out: naming its setting at once saves a second failure.
		return check("the brokers require TLS on this port (and, when their certificate is of a private CA, that CA)", SettingTLS, SettingTLSCA)
	case eofAt("SASL"):
		return check("the brokers closed the connection at the first request (they may require SASL)", SettingMechanism)
	case s.Mechanism != "" && eof == nil && isEOF(err):
		// Brokers that answer a failed authentication by closing the
		// connection (SaslAuthenticate v0, kfake), which some also do for
		// a mechanism they do not serve.
		return check("authentication as "+s.who()+" failed (wrong user or password, a SASL mechanism the brokers do not accept, or a listener without SASL, where the SASL flags must go; they closed the connection)", SettingUser, SettingPassword, SettingMechanism)
	case s.useTLS() && tlsHelloReset(err):
		// A plaintext listener that closes the connection on the TLS
		// hello with its bytes unread resets it, where franz-go knows
		// only an EOF (ErrFirstReadEOF): the local stack's plaintext
		// port did, and the error said "cannot reach brokers ... (is
		// Kafka running there?); check --brokers" (deploy review s67).
		return check("the brokers do not speak TLS on this port (a plaintext listener? it reset the connection at floe's TLS hello)", SettingTLS)
	case s.useTLS() && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()):
		return check("no TLS session with the brokers in time (a plaintext listener, or unreachable?)", SettingTLS, SettingBrokers)
	}
	return nil
}

// tlsHelloReset reports whether err is a connection reset while the TLS
// handshake of a dial waited for the brokers' answer: franz-go's dial
// (with TLS, the handshake too) failed on a read that met ECONNRESET.
func tlsHelloReset(err error) bool {
	op, ok := errors.AsType[*net.OpError](err)
	return ok && op.Op == "read" && strings.Contains(err.Error(), "unable to dial") && errors.Is(err, syscall.ECONNRESET)
}

// refusal is the part of explainDial that means the same at start and in
// a running sink: the brokers refusing floe's credentials or client
// certificate, or floe refusing the brokers' certificate. It is a
// CheckError naming the cause and the settings to fix, or nil for any
// other error (a closed connection or a timeout, which a running sink
// also gets from a broker restarting).
func (s Security) refusal(err error) *CheckError {
	check := func(msg string, settings ...Setting) *CheckError {
		return &CheckError{Settings: settings, Err: fmt.Errorf("%s: %w", msg, err)}
	}
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		verify    *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		switch s.Mechanism {
		case MechanismOAuthBearer:
			return check("the brokers refused the OAUTHBEARER token (expired, or not valid for this cluster)", SettingToken, SettingTokenURL)
		case MechanismMSKIAM:
			return check("the brokers refused the AWS credentials (AWS_MSK_IAM)", SettingMechanism)
		}
		return check("authentication as "+s.who()+" failed (wrong user or password)", SettingUser, SettingPassword)
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return check("the brokers do not accept SASL mechanism "+s.Mechanism+" on this port (a listener without SASL takes none: leave the SASL flags out there)", SettingMechanism)
	case errors.As(err, &hostname):
		return check("the brokers' certificate is not valid for the name "+hostname.Host, SettingTLSServerName)
	case errors.As(err, &unknownCA):
		return check("the brokers' certificate is signed by a CA floe does not trust", SettingTLSCA)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		// Not a setting of floe's: the brokers' certificate, or a clock.
		return check("the brokers' certificate has expired, or is not valid yet (renew it on the brokers, or check this host's clock)")
	case errors.As(err, &verify):
		return check("the brokers' certificate cannot be verified", SettingTLSCA, SettingTLSServerName)
	case strings.Contains(err.Error(), "remote error: tls: expired certificate"):
		return check("the brokers refused the client certificate as expired (or not valid yet): renew it", SettingTLSCert)
	case strings.Contains(err.Error(), "remote error: tls: certificate required") && s.TLSCertFile != "":
		// Go's client withholds a certificate that no CA the brokers
		// accept signed.
		return check("the brokers require a client certificate of a CA they accept, and "+s.TLSCertFile+" is signed by none of them", SettingTLSCert, SettingTLSKey)
	case strings.Contains(err.Error(), "remote error: tls: certificate required"):
		return check("the brokers require a client certificate (mutual TLS)", SettingTLSCert, SettingTLSKey)
	case strings.Contains(err.Error(), "remote error: tls: bad certificate"), strings.Contains(err.Error(), "remote error: tls: unknown certificate"):
		return check("the brokers refused the client certificate", SettingTLSCert, SettingTLSKey)
	}
	return nil
}

// who names the SASL identity in messages: the mechanism, and the user
// when there is one.
func (s Security) who() string {
	if s.User != "" {
		return fmt.Sprintf("%s user %q", s.Mechanism, s.User)
	}
	return s.Mechanism
}

// isEOF reports a connection closed mid-handshake: what a plaintext
// listener does with a TLS client hello.
func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
