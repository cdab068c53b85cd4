package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/localstack"
)

// TestCatalogURIUnparsablePasswordNotPrinted (from a review): a PostgreSQL
// catalog URI whose password holds a character that is not URL-encoded
// ('%' not followed by two hex digits, '#', a second '@'...) does not
// parse as a URL. catalog.redact then returns the URI as given, so the
// error prints the password twice (once in floe's "open PostgreSQL catalog
// URI", once in url.Parse's own `parse "URI": ...`). docs/deployment.md:
// "Errors and logs show URIs with the password replaced by xxxxx".
func TestCatalogURIUnparsablePasswordNotPrinted(t *testing.T) {
	const secret = "Pg-Secret-s49"
	addr := refusedTCPAddr(t)
	for _, pass := range []string{"50%off-" + secret, secret + "#x", "a@" + secret} {
		for _, cmd := range [][]string{
			{"status", "--table", "lake.orders"},
			{"audit", "--table", "lake.orders", "--brokers", ""},
		} {
			for _, uri := range []string{"postgres://floe:" + pass + "@" + addr + "/iceberg?sslmode=disable", "http://floe:" + pass + "@" + addr + "/catalog"} {
				code, out, errs := floe(t, append(cmd, "--catalog", uri)...)
				if code != exitError || strings.Contains(out+errs, secret) {
					t.Errorf("%s with a password %q: exit %d, output holds the password:\n%s%s", cmd[0], pass, code, out, errs)
				}
			}
		}
	}
}

// TestKafkaConfigPlaintextProtocolHonoured (from a review): docs/secured-
// kafka.md says --kafka-config reads "the properties file your other Kafka
// clients already use" and that "a flag, its variable or its config-file
// key overrides the file". Two ways that is not so against a plaintext
// listener:
//   - a file with security.protocol=PLAINTEXT that also names
//     ssl.ca.location (a shared template; the Java client and librdkafka
//     ignore ssl.* under PLAINTEXT) makes floe speak TLS, because a CA file
//     implies TLS;
//   - --kafka-tls=false (or FLOE_KAFKA_TLS=false) cannot turn off the
//     file's security.protocol=SSL: security() ORs the two.
//
// Either way the sink fails after --dial-timeout with "no TLS session with
// the brokers in time ... check --kafka-tls", a flag the user did not give
// or gave as false.
func TestKafkaConfigPlaintextProtocolHonoured(t *testing.T) {
	st, _ := sinkStack(t)
	dir := t.TempDir()
	certs, err := localstack.WriteCerts(filepath.Join(dir, "tls"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ca := certs.CAFile
	plainProps := filepath.Join(dir, "plain.properties")
	writeFile(t, plainProps, "bootstrap.servers="+st.Brokers[0]+"\nsecurity.protocol=PLAINTEXT\nssl.ca.location="+ca+"\n")
	sslProps := filepath.Join(dir, "ssl.properties")
	writeFile(t, sslProps, "bootstrap.servers="+st.Brokers[0]+"\nsecurity.protocol=SSL\nssl.ca.location="+ca+"\n")
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"PLAINTEXT file with a CA location", []string{"--kafka-config", plainProps}, ""},
		{"--kafka-tls=false over an SSL file", []string{"--kafka-config", sslProps, "--kafka-tls=false"}, ""},
		{"FLOE_KAFKA_TLS=false over an SSL file", []string{"--kafka-config", sslProps}, "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("FLOE_KAFKA_TLS", tc.env)
			}
			_, catFlags := localCatalog(t)
			args := append(append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders",
				"--stop-at-end", "--dial-timeout", "3s"}, catFlags...), tc.args...)
			code, out, errs := floe(t, args...)
			if code != 0 || !strings.Contains(out, "300 rows") {
				t.Errorf("exit %d, want 0 with 300 rows (a plaintext listener, plaintext asked for)\n%s\nerror line: %s", code, out, errorLine(errs))
			}
		})
	}
}

// TestKafkaConfigMSKIAMRoleNotDropped (from a review): the client properties
// AWS documents for MSK IAM put the role to assume (and the profile) in
// sasl.jaas.config: IAMLoginModule required awsRoleArn="..."
// awsProfileName="...". floe reads sasl.jaas.config (docs/secured-kafka.md
// lists it) but keeps only username/password/clientId/clientSecret/scope:
// awsRoleArn and awsProfileName are dropped without a word, and
// AWS_MSK_IAM then signs as whatever the default chain holds (the
// instance's own role, another profile): authorisation errors at best,
// another principal's access at worst. An option floe cannot honour must
// be refused, as Java key stores are.
func TestKafkaConfigMSKIAMRoleNotDropped(t *testing.T) {
	dir := t.TempDir()
	for _, opt := range []string{`awsRoleArn="arn:aws:iam::123456789012:role/floe-reader"`, `awsProfileName="prod"`} {
		props := filepath.Join(dir, "msk.properties")
		writeFile(t, props, "security.protocol=SASL_SSL\nsasl.mechanism=AWS_MSK_IAM\n"+
			"sasl.jaas.config=software.amazon.msk.auth.iam.IAMLoginModule required "+opt+";\n"+
			"sasl.client.callback.handler.class=software.amazon.msk.auth.iam.IAMClientCallbackHandler\n")
		sec, _, err := readKafkaProperties(props)
		if err == nil {
			t.Errorf("%s: read without an error as %+v: the option is dropped, and AWS_MSK_IAM signs with the default credential chain", opt, sec)
		}
	}
}

// TestConfigFileSecretAnchorOrComment (from a review): TestConfigFileSecret-
// InYAMLError made a value starting with '*' (an alias) or '!' (a tag) an
// error naming the line. Two more leading characters make YAML read a
// password as something else, silently:
//   - '&' starts an anchor: "&Pw-Secret" is an anchor named Pw-Secret on an
//     empty value, and "&Pw Secret" the value "Secret";
//   - '#' after the colon and a space starts a comment: the value is empty.
//
// floe then says "missing --kafka-sasl-password (or
// FLOE_KAFKA_SASL_PASSWORD)" about a key the file sets, or tries a wrong
// password and blames the user or the password. Either should be refused
// naming the line and the fix (quote it), as '*' and '!' are.
func TestConfigFileSecretAnchorOrComment(t *testing.T) {
	const secret = "Pw-Secret-s49"
	for _, value := range []string{"&" + secret, "&Pw " + secret, "#" + secret} {
		path := filepath.Join(t.TempDir(), "floe.yaml")
		writeFile(t, path, "brokers: 127.0.0.1:1\nkafka-sasl-mechanism: SCRAM-SHA-512\nkafka-sasl-user: floe\nkafka-sasl-password: "+value+"\n")
		code, out, errs := floe(t, "sink", "--config", path, "--topic", "t", "--table", "lake.t", "--dial-timeout", "2s", "--retry-for", "0s")
		line := errorLine(errs)
		if code != exitError || strings.Contains(out+errs, secret) || !strings.Contains(line, "line 4") || strings.Contains(line, "missing --kafka-sasl-password") {
			t.Errorf("a password written %s: exit %d, error line:\n%s\nwant one naming line 4 and how to quote it", value, code, line)
		}
	}
}

// TestKafkaConfigJAASSingleQuotes (from a review): Kafka's own JAAS parser
// (org.apache.kafka.common.security.JaasConfig) takes option values in
// single quotes as well as double quotes (its tokenizer has both as quote
// characters), so a client.properties with
//
//	sasl.jaas.config=...ScramLoginModule required username='floe' password='...';
//
// works for the Java client. floe's parseJAAS only strips double quotes:
// it reads the user as 'floe' and the password with its quotes, and the
// brokers refuse the login with "wrong user or password" although the
// file is right.
func TestKafkaConfigJAASSingleQuotes(t *testing.T) {
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-512", floeUser, floePass))
	count := c.topic(t, "orders", 1, 10)
	cat, catFlags := localCatalog(t)
	props := filepath.Join(t.TempDir(), "client.properties")
	writeFile(t, props, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username='"+floeUser+"' password='"+floePass+"';\n"+
		"ssl.ca.location="+c.certs.CAFile+"\n")
	code, out, errs := floe(t, append([]string{"sink", "--brokers", c.brokers[0], "--kafka-config", props,
		"--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, catFlags...)...)
	noSecret(t, out, errs)
	if code != 0 {
		t.Fatalf("exit %d with a JAAS config the Java client accepts; error line:\n%s", code, errorLine(errs))
	}
	checkTable(t, cat, "lake.orders", "orders", count)
}

// TestTopicRegexHiddenByACLsNamed (from a review): brokers list only the
// topics the principal may Describe (docs/secured-kafka.md says so in its
// ACL table). A --topic-regex sink whose user lacks the topic ACLs is told
// "a pattern that matches at least one whole topic name (this one matches
// none); the brokers have no topics": the pattern and the cluster are
// blamed, and nothing points at the missing ACL, the actual cause (every
// other authorization failure names the principal, the operation and the
// kafka-acls.sh command). With a secured connection the message should say
// that the brokers list only what User:NAME may Describe.
func TestTopicRegexHiddenByACLsNamed(t *testing.T) {
	c := startSecureCluster(t, false, kfake.EnableACLs(), kfake.User("SCRAM-SHA-512", floeUser, floePass))
	c.topic(t, "orders", 1, 10)
	_, catFlags := localCatalog(t)
	code, out, errs := floe(t, append(append([]string{"sink", "--topic-regex", "ord.*", "--table", "lake.{topic}", "--stop-at-end"},
		c.userFlags("SCRAM-SHA-512", floeUser, floePass)...), catFlags...)...)
	noSecret(t, out, errs)
	line := errorLine(errs)
	if code != exitError || !strings.Contains(line, "User:"+floeUser) || !strings.Contains(line, "Describe") {
		t.Errorf("exit %d, error line:\n%s\nwant exit 2 naming User:%s and the Describe (or Read) ACL the brokers filter topics by", code, line, floeUser)
	}
}

// TestKafkaConfigInlinePEMNotIgnored (from a review): a client properties
// file may carry its PEM material inline instead of in files: librdkafka's
// ssl.ca.pem (and ssl.certificate.pem, ssl.key.pem), the Java client's
// ssl.truststore.type=PEM with ssl.truststore.certificates (KIP-651).
// floe reads neither and says nothing (they are not within two edits of a
// key it reads, so checkPropertyNames lets them pass, while Java key
// stores get a message saying what to do): the connection then trusts the
// system's CAs and fails with "signed by a CA floe does not trust ...;
// check --kafka-tls-ca" although the file names the CA.
func TestKafkaConfigInlinePEMNotIgnored(t *testing.T) {
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-512", floeUser, floePass))
	c.topic(t, "orders", 1, 10)
	pem, err := os.ReadFile(c.certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	inline := strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", "\\n\\\n")
	for name, body := range map[string]string{
		"librdkafka ssl.ca.pem":            "ssl.ca.pem=" + inline + "\n",
		"Java ssl.truststore.certificates": "ssl.truststore.type=PEM\nssl.truststore.certificates=" + inline + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, catFlags := localCatalog(t)
			props := filepath.Join(t.TempDir(), "client.properties")
			writeFile(t, props, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username="+floeUser+"\nsasl.password="+floePass+"\n"+body)
			code, out, errs := floe(t, append([]string{"sink", "--brokers", c.brokers[0], "--kafka-config", props,
				"--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, catFlags...)...)
			noSecret(t, out, errs)
			line := errorLine(errs)
			if code != 0 && !strings.Contains(line, props) {
				t.Errorf("exit %d, error line:\n%s\nwant the inline CA used, or the file refused naming the key (as for Java key stores)", code, line)
			}
		})
	}
}

// TestKafkaConfigBootstrapServers (from an operator's run): the client
// properties file names the brokers in bootstrap.servers, and floe ignored
// it: a sink without --brokers was refused for missing brokers, an audit
// answered without the log. The file's brokers serve where no flag,
// variable or config-file key gives --brokers, and an error about them
// names the file's line.
func TestKafkaConfigBootstrapServers(t *testing.T) {
	st, _ := sinkStack(t)
	dir := t.TempDir()
	props := filepath.Join(dir, "client.properties")
	writeFile(t, props, "security.protocol=PLAINTEXT\nbootstrap.servers=PLAINTEXT://"+st.Brokers[0]+"\n")
	_, catFlags := localCatalog(t)
	code, out, errs := floe(t, append([]string{"sink", "--kafka-config", props, "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--dial-timeout", "3s"}, catFlags...)...)
	if code != 0 || !strings.Contains(out, "300 rows") {
		t.Fatalf("exit %d, want 0 with 300 rows from the file's brokers\n%s\nerror line: %s", code, out, errorLine(errs))
	}

	dead := filepath.Join(dir, "dead.properties")
	writeFile(t, dead, "# the cluster\nbootstrap.servers="+refusedTCPAddr(t)+"\n")
	code, _, errs = floe(t, append([]string{"sink", "--kafka-config", dead, "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--dial-timeout", "1s"}, catFlags...)...)
	if want := "--kafka-config " + dead + " line 2 (bootstrap.servers)"; code == 0 || !strings.Contains(errorLine(errs), want) {
		t.Errorf("exit %d; want the error to name %q\n%s", code, want, errorLine(errs))
	}
	// --brokers '' still means none: the audit answers from the table.
	code, out, errs = floe(t, append([]string{"audit", "--kafka-config", dead, "--brokers", "", "--table", "lake.orders"}, catFlags...)...)
	if code != 0 || !strings.Contains(out, "COMPLETE") {
		t.Errorf("audit --brokers '': exit %d, want 0 and COMPLETE from the table alone\n%s\nerror line: %s", code, out, errorLine(errs))
	}
}

// TestStatusBadKafkaConfigIsAUsageError (from an operator's run): a
// --kafka-config file that cannot be read, or whose settings do not fit,
// was reported as brokers that failed, under the table's side ("the
// brokers' side failed: ..."), as if the cluster were down. Like a bad
// --kafka-tls-ca it is a usage error: the error alone, naming the file.
func TestStatusBadKafkaConfigIsAUsageError(t *testing.T) {
	st, _ := sinkStack(t)
	_, catFlags := localCatalog(t)
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, catFlags...)...); code != 0 {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.properties")
	writeFile(t, bad, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
	for _, file := range []string{filepath.Join(dir, "missing.properties"), bad} {
		code, out, errs := floe(t, append([]string{"status", "--brokers", st.Brokers[0], "--kafka-config", file, "--table", "lake.orders"}, catFlags...)...)
		if line := errorLine(errs); code != 2 || out != "" || !strings.Contains(line, file) || strings.Contains(line, "brokers' side failed") {
			t.Errorf("--kafka-config %s: exit %d; want 2, nothing on stdout and the error naming the file, not the brokers\nstdout: %s\nerror line: %s", file, code, out, line)
		}
	}
}

// TestKafkaConfigSeparators: a --kafka-config file takes the separators
// java.util.Properties takes: '=', ':' and white space; "KEY VALUE" was
// refused (from a new-user run).
func TestKafkaConfigSeparators(t *testing.T) {
	path := filepath.Join(t.TempDir(), "client.properties")
	if err := os.WriteFile(path, []byte("security.protocol=SASL_SSL\nsasl.mechanism SCRAM-SHA-512\nsasl.username: alice\nssl.endpoint.identification.algorithm =  https\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	props, err := parseProperties(path)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "ssl.endpoint.identification.algorithm": "https"} {
		if props[k].value != v {
			t.Errorf("%s = %q, want %q", k, props[k].value, v)
		}
	}
}
