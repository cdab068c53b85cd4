package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/connector"
)

// kafkaSecurityFlags say how floe's Kafka clients encrypt and
// authenticate: TLS, mutual TLS and SASL, from flags or a standard Kafka
// client properties file (--kafka-config); a flag (or its FLOE_ variable,
// or its key in --config) overrides the file.
type kafkaSecurityFlags struct {
	kafkaConfig string
	sec         connector.Security
	fs          *pflag.FlagSet // to tell which flags were given
}

// Flag names of kafkaSecurityFlags.
const (
	flagKafkaConfig   = "kafka-config"
	flagTLS           = "kafka-tls"
	flagTLSCA         = "kafka-tls-ca"
	flagTLSCert       = "kafka-tls-cert"
	flagTLSKey        = "kafka-tls-key"
	flagTLSServerName = "kafka-tls-server-name"
	flagMechanism     = "kafka-sasl-mechanism"
	flagUser          = "kafka-sasl-user"
	flagPassword      = "kafka-sasl-password"
	flagToken         = "kafka-sasl-token"
	flagTokenURL      = "kafka-sasl-token-url"
	flagScope         = "kafka-sasl-scope"
)

func (f *kafkaSecurityFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	s := &f.sec
	fs.StringVar(&f.kafkaConfig, flagKafkaConfig, "", "Kafka client properties `FILE` (security.protocol, sasl.mechanism, sasl.jaas.config, sasl.username, sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location, and bootstrap.servers where --brokers is not given); the --kafka-* flags override it")
	fs.BoolVar(&s.TLS, flagTLS, false, "connect to the brokers over TLS, trusting the system's CAs")
	fs.StringVar(&s.TLSCAFile, flagTLSCA, "", "PEM `FILE` of the CAs that sign the brokers' certificates (implies --kafka-tls)")
	fs.StringVar(&s.TLSCertFile, flagTLSCert, "", "PEM client certificate `FILE` for mutual TLS (with --kafka-tls-key)")
	fs.StringVar(&s.TLSKeyFile, flagTLSKey, "", "PEM private key `FILE` of --kafka-tls-cert")
	fs.StringVar(&s.TLSServerName, flagTLSServerName, "", "`NAME` the brokers' certificates carry, when not the host of --brokers")
	fs.StringVar(&s.Mechanism, flagMechanism, "", "SASL `MECHANISM`: "+strings.Join(connector.Mechanisms, ", ")+" (AWS_MSK_IAM uses the AWS credential chain)")
	fs.StringVar(&s.User, flagUser, "", "SASL `USER` (PLAIN, SCRAM), or the OAuth client id with --kafka-sasl-token-url")
	fs.StringVar(&s.Password, flagPassword, "", "SASL `PASSWORD`, or the OAuth client secret with --kafka-sasl-token-url (prefer FLOE_KAFKA_SASL_PASSWORD)")
	fs.StringVar(&s.Token, flagToken, "", "OAUTHBEARER static `TOKEN` (prefer FLOE_KAFKA_SASL_TOKEN)")
	fs.StringVar(&s.TokenURL, flagTokenURL, "", "OAUTHBEARER: OAuth 2 token endpoint `URL` to get tokens from with the client-credentials grant")
	fs.StringVar(&s.Scope, flagScope, "", "OAUTHBEARER: `SCOPE` asked of --kafka-sasl-token-url")
}

// security is the flags over the --kafka-config file. Where a setting's
// value came from the file, it records that in ctx's flagSources, so that
// an error about the setting names the file's line, not only a flag the
// user never gave.
func (f *kafkaSecurityFlags) security(ctx context.Context) (connector.Security, error) {
	if f.kafkaConfig == "" {
		return f.sec, nil
	}
	sec, origins, err := readKafkaProperties(f.kafkaConfig)
	if err != nil {
		return sec, err
	}
	given := func(name string) bool { return f.fs != nil && f.fs.Changed(name) }
	// TLS is the file's protocol unless --kafka-tls says otherwise. Off,
	// by a plaintext security.protocol (as the Java client and librdkafka
	// read it) or by --kafka-tls=false, the file's ssl.* settings do not
	// apply: a CA file would turn TLS on again (found by review). A file
	// that names no protocol keeps them, and its CA file implies TLS.
	plainFile := !sec.TLS && origins[flagTLS] != ""
	if given(flagTLS) {
		sec.TLS = f.sec.TLS
	}
	if !sec.TLS && (plainFile || given(flagTLS)) {
		sec.TLSCAFile, sec.TLSCertFile, sec.TLSKeyFile = "", "", ""
		for _, name := range []string{flagTLSCA, flagTLSCert, flagTLSKey} {
			delete(origins, name)
		}
	}
	for name, pair := range map[string][2]*string{
		flagTLSCA:         {&sec.TLSCAFile, &f.sec.TLSCAFile},
		flagTLSCert:       {&sec.TLSCertFile, &f.sec.TLSCertFile},
		flagTLSKey:        {&sec.TLSKeyFile, &f.sec.TLSKeyFile},
		flagTLSServerName: {&sec.TLSServerName, &f.sec.TLSServerName},
		flagMechanism:     {&sec.Mechanism, &f.sec.Mechanism},
		flagUser:          {&sec.User, &f.sec.User},
		flagPassword:      {&sec.Password, &f.sec.Password},
		flagToken:         {&sec.Token, &f.sec.Token},
		flagTokenURL:      {&sec.TokenURL, &f.sec.TokenURL},
		flagScope:         {&sec.Scope, &f.sec.Scope},
	} {
		if given(name) {
			*pair[0] = *pair[1]
			delete(origins, name)
		}
	}
	if given(flagTLS) {
		delete(origins, flagTLS)
	}
	if src := sourcesOf(ctx); src != nil {
		maps.Copy(src, origins)
	}
	// A SASL mechanism the file names without its user or password: the
	// error names the file, which is where the user set it.
	if from, ok := origins[flagMechanism]; ok && slices.Contains(userMechanisms, sec.Mechanism) && (sec.User == "" || sec.Password == "") {
		return sec, fmt.Errorf("%s: %s needs a user and a password: set sasl.username and sasl.password there (or username and password in sasl.jaas.config), or pass --%s and --%s (FLOE_KAFKA_SASL_PASSWORD)",
			from, sec.Mechanism, flagUser, flagPassword)
	}
	return sec, nil
}

// userMechanisms are the SASL mechanisms that authenticate a user with a
// password.
var userMechanisms = []string{connector.MechanismPlain, connector.MechanismScram256, connector.MechanismScram512}

// readKafkaProperties reads the security settings of a Kafka client
// properties file, as the Java client and librdkafka name them. Keys that
// are not about security (client.id, ...) are ignored so that the file
// other clients read serves floe too; bootstrap.servers is read by
// brokersFromKafkaConfig.
//
// origins says, for each flag whose setting the file gave, which line:
// "--kafka-config client.properties line 3 (ssl.ca.location)".
func readKafkaProperties(path string) (sec connector.Security, origins map[string]string, err error) {
	props, err := parseProperties(path)
	if err != nil {
		return sec, nil, err
	}
	origins = map[string]string{}
	// get is the value of the first of keys the file sets, recording its
	// line as the origin of flag's setting.
	get := func(flag string, keys ...string) string {
		for _, key := range keys {
			if p := props[key]; p.value != "" {
				if flag != "" {
					origins[flag] = fmt.Sprintf("--kafka-config %s line %d (%s)", path, p.line, key)
				}
				return p.value
			}
		}
		return ""
	}
	// librdkafka names the mechanism sasl.mechanisms; the Java client
	// sasl.mechanism.
	if p, ok := props["sasl.mechanisms"]; ok {
		if _, both := props["sasl.mechanism"]; !both {
			props["sasl.mechanism"] = p
		}
	}
	if err := checkPropertyNames(path, props); err != nil {
		return sec, nil, err
	}
	bad := func(key, format string, args ...any) error {
		if p, ok := props[key]; ok {
			return fmt.Errorf("--kafka-config %s line %d: %s: %s", path, p.line, key, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("--kafka-config %s: %s is not set: %s", path, key, fmt.Sprintf(format, args...))
	}
	for _, key := range []string{"ssl.truststore.location", "ssl.keystore.location"} {
		if get("", key) != "" {
			return sec, nil, bad(key, "floe reads PEM files, not Java key stores: export them (keytool -exportcert -rfc, openssl pkcs12) and set ssl.ca.location, ssl.certificate.location and ssl.key.location")
		}
	}
	// Certificates inline in the file (librdkafka's *.pem, KIP-651's PEM
	// stores) were ignored, and the system's CAs trusted instead (found by
	// review).
	inline := map[string]string{
		"ssl.ca.pem": "ssl.ca.location", "ssl.truststore.certificates": "ssl.ca.location",
		"ssl.certificate.pem": "ssl.certificate.location", "ssl.keystore.certificate.chain": "ssl.certificate.location",
		"ssl.key.pem": "ssl.key.location", "ssl.keystore.key": "ssl.key.location",
	}
	for _, key := range slices.Sorted(maps.Keys(inline)) {
		if get("", key) != "" {
			return sec, nil, bad(key, "floe reads certificates and keys from PEM files, not inline: write the PEM to a file and set %s to its path", inline[key])
		}
	}
	sasl := false
	protocol := get(flagTLS, "security.protocol")
	switch strings.ToUpper(protocol) {
	case "", "PLAINTEXT":
	case "SSL":
		sec.TLS = true
	case "SASL_PLAINTEXT":
		sasl = true
	case "SASL_SSL":
		sec.TLS, sasl = true, true
	default:
		return sec, nil, bad("security.protocol", "%q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", protocol)
	}
	// A plaintext protocol's ssl.* settings are set aside by security,
	// unless --kafka-tls turns TLS on.
	sec.TLSCAFile = get(flagTLSCA, "ssl.ca.location")
	sec.TLSCertFile = get(flagTLSCert, "ssl.certificate.location")
	sec.TLSKeyFile = get(flagTLSKey, "ssl.key.location")
	mech := strings.ToUpper(get(flagMechanism, "sasl.mechanism"))
	switch {
	case !sasl && mech != "":
		return sec, nil, bad("sasl.mechanism", "%s needs security.protocol SASL_SSL or SASL_PLAINTEXT (it is %q)", mech, protocol)
	case !sasl:
		return sec, origins, nil
	case mech == "":
		return sec, nil, bad("sasl.mechanism", "security.protocol %s needs one: floe supports %s (librdkafka names it sasl.mechanisms)", protocol, strings.Join(connector.Mechanisms, ", "))
	case mech == "GSSAPI":
		return sec, nil, bad("sasl.mechanism", "%q: floe supports %s (Kerberos, GSSAPI, is not supported)", props["sasl.mechanism"].value, strings.Join(connector.Mechanisms, ", "))
	}
	sec.Mechanism = mech
	sec.User = get(flagUser, "sasl.oauthbearer.client.id", "sasl.username")
	sec.Password = get(flagPassword, "sasl.oauthbearer.client.secret", "sasl.password")
	sec.TokenURL = get(flagTokenURL, "sasl.oauthbearer.token.endpoint.url")
	sec.Scope = get(flagScope, "sasl.oauthbearer.scope")
	if jaas := props["sasl.jaas.config"]; jaas.value != "" {
		module, opts, err := parseJAAS(jaas.value)
		if err != nil {
			return sec, nil, bad("sasl.jaas.config", "%v", err)
		}
		want := map[string]string{
			connector.MechanismPlain:       "PlainLoginModule",
			connector.MechanismScram256:    "ScramLoginModule",
			connector.MechanismScram512:    "ScramLoginModule",
			connector.MechanismOAuthBearer: "OAuthBearerLoginModule",
			connector.MechanismMSKIAM:      "IAMLoginModule",
		}[mech]
		if want != "" && !strings.HasSuffix(module, "."+want) && module != want {
			return sec, nil, bad("sasl.jaas.config", "login module %s does not serve sasl.mechanism %s: want a %s", module, mech, want)
		}
		// AWS's MSK IAM login module takes the role or profile to sign
		// as; floe signs with the SDK's default chain, and dropping them
		// would sign as another principal (found by review).
		for _, opt := range []string{"awsRoleArn", "awsProfileName", "awsRoleSessionName", "awsStsRegion", "awsRoleExternalId", "awsRoleAccessKeyId", "awsRoleSecretAccessKey"} {
			if _, ok := opts[opt]; ok {
				return sec, nil, bad("sasl.jaas.config", "option %s: floe's AWS_MSK_IAM signs with the AWS SDK's default credential chain and does not read it; name the profile or role there instead (AWS_PROFILE, or a profile with role_arn and source_profile in ~/.aws/config, or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE) and remove the option", opt)
			}
		}
		origin := fmt.Sprintf("--kafka-config %s line %d (sasl.jaas.config)", path, jaas.line)
		for _, o := range []struct {
			flag string
			to   *string
			keys []string
		}{
			{flagUser, &sec.User, []string{"username", "clientId"}},
			{flagPassword, &sec.Password, []string{"password", "clientSecret"}},
			{flagScope, &sec.Scope, []string{"scope"}},
		} {
			if v := orElse(opts[o.keys[0]], opts[o.keys[len(o.keys)-1]]); v != "" {
				*o.to, origins[o.flag] = v, origin
			}
		}
	}
	return sec, origins, nil
}

// securityProperties are the properties of a client's configuration that
// readKafkaProperties reads (the Java client's and librdkafka's names),
// and the security properties it knows and leaves alone.
var securityProperties = []string{
	"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.jaas.config",
	"sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.scope",
	"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.truststore.location", "ssl.keystore.location",
	"ssl.truststore.password", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.keystore.type",
	"ssl.endpoint.identification.algorithm", "sasl.kerberos.service.name", "sasl.login.callback.handler.class",
	"sasl.client.callback.handler.class", "sasl.oauthbearer.method", "ssl.protocol", "ssl.enabled.protocols",
	"ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem", "ssl.truststore.certificates", "ssl.keystore.certificate.chain", "ssl.keystore.key",
}

// checkPropertyNames refuses a property of props that is two edits or
// fewer from one floe reads but is not one (ssl.ca.locaton): left unread,
// it would leave its setting at the default without a word. Other keys
// (client.id, acks, ...) belong to other clients and are ignored.
func checkPropertyNames(path string, props map[string]property) error {
	for _, key := range slices.Sorted(maps.Keys(props)) {
		if slices.Contains(securityProperties, key) {
			continue
		}
		if close := closeTo(key, securityProperties); len(close) > 0 {
			return fmt.Errorf("--kafka-config %s line %d: %s is not a setting floe reads; did you mean %s?", path, props[key].line, key, strings.Join(close, " or "))
		}
	}
	return nil
}

// orElse is a unless it is empty, else b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

type property struct {
	value string
	line  int
}

// parseProperties reads a Java properties file: KEY=VALUE, KEY: VALUE or
// KEY VALUE lines, # and ! comments, a trailing backslash continuing a
// line.
func parseProperties(path string) (map[string]property, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--kafka-config: %w", err)
	}
	defer fh.Close()
	props := map[string]property{}
	sc := bufio.NewScanner(fh)
	var (
		logical string
		start   int
	)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if logical == "" {
			start = n
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
		}
		if strings.HasSuffix(line, `\`) {
			logical += strings.TrimSuffix(line, `\`)
			continue
		}
		logical += line
		// As java.util.Properties: the key ends at the first '=', ':' or
		// white space, and one '=' or ':' may follow the space ("KEY
		// VALUE" was refused: from a new-user run).
		i := strings.IndexAny(logical, "=: \t\f")
		if i < 0 {
			return nil, fmt.Errorf("--kafka-config %s line %d: want KEY=VALUE", path, start)
		}
		value := strings.TrimLeft(logical[i:], " \t\f")
		if value != "" && (value[0] == '=' || value[0] == ':') {
			value = value[1:]
		}
		props[logical[:i]] = property{value: strings.TrimSpace(value), line: start}
		logical = ""
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--kafka-config %s: %w", path, err)
	}
	return props, nil
}

// parseJAAS parses a sasl.jaas.config value: a login module's class name,
// its control flag and KEY="VALUE" options, ending with a semicolon.
func parseJAAS(s string) (module string, opts map[string]string, err error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return "", nil, fmt.Errorf("want LOGIN_MODULE required KEY=\"VALUE\" ...;")
	}
	module = fields[0]
	rest := strings.TrimSpace(strings.TrimPrefix(s, module))
	rest = strings.TrimSpace(rest[len(strings.Fields(rest)[0]):]) // the control flag
	opts = map[string]string{}
	prev := "the control flag"
	for rest != "" {
		// Errors name the option before, never the text: it may hold a
		// password.
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			return "", nil, fmt.Errorf("after %s: want KEY=\"VALUE\"", prev)
		}
		key := strings.TrimSpace(rest[:eq])
		rest = strings.TrimSpace(rest[eq+1:])
		var val string
		// Kafka's JaasConfig quotes with " or ' alike.
		if q := rest[:min(1, len(rest))]; q == `"` || q == "'" {
			end := 1
			var b strings.Builder
			for ; end < len(rest) && rest[end] != q[0]; end++ {
				if rest[end] == '\\' && end+1 < len(rest) {
					end++
				}
				b.WriteByte(rest[end])
			}
			if end >= len(rest) {
				return "", nil, fmt.Errorf("option %s: unterminated quoted value", key)
			}
			val, rest = b.String(), strings.TrimSpace(rest[end+1:])
		} else {
			sp := strings.IndexAny(rest, " \t")
			if sp < 0 {
				sp = len(rest)
			}
			val, rest = rest[:sp], strings.TrimSpace(rest[sp:])
		}
		opts[key] = val
		prev = key
	}
	return module, opts, nil
}
