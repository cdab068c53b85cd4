package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Credentials of the secured test clusters. The passwords are long and
// unusual so that a test can tell them in any output.
const (
	adminUser = "admin"
	adminPass = "admin-Secret-7f3a9c"
	floeUser  = "floe"
	floePass  = "floe-Secret-91b2d4"
)

// secureCluster is a kfake broker over TLS (certificates made for
// 127.0.0.1 in the test) with SASL, a superuser admin (SCRAM-SHA-512) and
// the extra options (users, ACLs, mutual TLS).
type secureCluster struct {
	cluster *kfake.Cluster
	brokers []string
	certs   localstack.Certs
	admin   []kgo.Opt // client options of the superuser
}

func startSecureCluster(t *testing.T, mutual bool, opts ...kfake.Opt) *secureCluster {
	t.Helper()
	certs, err := localstack.WriteCerts(filepath.Join(t.TempDir(), "tls"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	tc, err := certs.ServerTLS(mutual)
	if err != nil {
		t.Fatal(err)
	}
	kopts := append([]kfake.Opt{kfake.TLS(tc), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", adminUser, adminPass)}, opts...)
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: kopts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	clientTLS := caTLS(t, certs.CAFile)
	if mutual {
		cert, err := tls.LoadX509KeyPair(certs.CertFile, certs.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		clientTLS.Certificates = []tls.Certificate{cert}
	}
	return &secureCluster{cluster: st.Cluster, brokers: st.Brokers, certs: certs,
		admin: []kgo.Opt{kgo.DialTLSConfig(clientTLS), kgo.SASL(scram.Auth{User: adminUser, Pass: adminPass}.AsSha512Mechanism())}}
}

// topic creates topic with partitions and produces n records to each, as
// the superuser.
func (c *secureCluster) topic(t *testing.T, topic string, partitions int32, n int) map[int32]int64 {
	t.Helper()
	if err := localstack.CreateTopic(t.Context(), c.brokers, topic, partitions, nil, c.admin...); err != nil {
		t.Fatal(err)
	}
	return c.produce(t, topic, partitions, n, map[int32]int64{})
}

func (c *secureCluster) produce(t *testing.T, topic string, partitions int32, n int, count map[int32]int64) map[int32]int64 {
	t.Helper()
	var recs []*kgo.Record
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i)})
		}
		count[p] += int64(n)
	}
	if err := localstack.Produce(t.Context(), c.brokers, recs, c.admin...); err != nil {
		t.Fatal(err)
	}
	return count
}

// userFlags are the flags of user with password over TLS trusting the
// cluster's CA.
func (c *secureCluster) userFlags(mechanism, user, password string) []string {
	return []string{"--brokers", c.brokers[0], "--kafka-tls-ca", c.certs.CAFile,
		"--kafka-sasl-mechanism", mechanism, "--kafka-sasl-user", user, "--kafka-sasl-password", password}
}

// allow is an ACL allowing op on a literal resource.
func allow(res kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
	return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
}

// leastPrivilege are the ACLs docs/secured-kafka.md lists for a floe
// principal on topic, with group "" for static mode. Read implies
// Describe (Kafka's rule).
func leastPrivilege(topic, group string) []kfake.ACL {
	acls := []kfake.ACL{
		allow(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationDescribeConfigs),
	}
	if group != "" {
		acls = append(acls, allow(kmsg.ACLResourceTypeGroup, group, kmsg.ACLOperationRead))
	}
	return acls
}

// noSecret fails the test when any output holds a password.
func noSecret(t *testing.T, outputs ...string) {
	t.Helper()
	for _, o := range outputs {
		for _, secret := range []string{adminPass, floePass} {
			if strings.Contains(o, secret) {
				t.Errorf("output holds a password:\n%s", o)
			}
		}
	}
}

// TestSecureSinkAuditReplay runs floe through the CLI against a broker
// with TLS, SCRAM-SHA-512 and ACLs, as a user holding exactly the ACLs
// docs/secured-kafka.md lists: the sink in static mode, the audit at
// content level, a replay, and a live sink in group mode for six seconds
// while the broker's sessions last three (KIP-368: the client
// re-authenticates each connection), all at debug log level, and no
// password in any output.
func TestSecureSinkAuditReplay(t *testing.T) {
	const topic, group = "orders", "floe-orders"
	c := startSecureCluster(t, false,
		kfake.EnableACLs(),
		kfake.User("SCRAM-SHA-512", floeUser, floePass, leastPrivilege(topic, group)...),
		// franz-go re-authenticates a second before a session ends.
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "3000"}))
	count := c.topic(t, topic, 2, 50)
	cat, catFlags := localCatalog(t)
	user := append(c.userFlags("SCRAM-SHA-512", floeUser, floePass), catFlags...)
	debug := []string{"--log-level", "debug"}
	run := func(args ...string) string {
		t.Helper()
		code, out, errs := floe(t, append(append(args, user...), debug...)...)
		noSecret(t, out, errs)
		if code != 0 {
			t.Fatalf("floe %s: exit %d\n%s\n%s", args[0], code, out, errs)
		}
		return out
	}

	run("sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end")
	checkTable(t, cat, "lake.orders", topic, count)

	if out := run("audit", "--table", "lake.orders", "--verify-content"); !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("audit over SASL_SSL:\n%s", out)
	}
	run("replay", "--topic", topic, "--table", "lake.orders_rebuilt")
	checkTable(t, cat, "lake.orders_rebuilt", topic, count)

	// A live sink in group mode outlives several re-authentications.
	// floe's authentications: SCRAM first messages naming its user.
	var auths atomic.Int64
	c.cluster.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if strings.Contains(string(req.(*kmsg.SASLAuthenticateRequest).SASLAuthBytes), "n="+floeUser+",") {
			auths.Add(1)
		}
		c.cluster.KeepControl()
		return nil, nil, false
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var stdout, stderr string
	go func() {
		var err error
		stdout, stderr, err = floeCtx(ctx, append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--flush-interval", "200ms", "--group", group}, append(user, debug...)...)...)
		done <- err
	}()
	var initial int64
	for i := range 6 {
		time.Sleep(time.Second)
		if i == 0 {
			initial = auths.Load() // before the first session ends
		}
		count = c.produce(t, topic, 2, 10, count)
	}
	waitFor(t, 20*time.Second, "the live sink to commit every record", func() bool {
		return sunkTo(t, cat, "lake.orders", topic, 0) == count[0] && sunkTo(t, cat, "lake.orders", topic, 1) == count[1]
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("live sink across re-authentications: %v\n%s", err, stderr)
	}
	noSecret(t, stdout, stderr)
	checkTable(t, cat, "lake.orders", topic, count)
	// Over six seconds of three-second sessions, each connection
	// authenticates again at least twice.
	if n := auths.Load(); n < 2*initial {
		t.Errorf("floe authenticated %d times in all, %d in its first second: its connections were not re-authenticated", n, initial)
	}
	t.Logf("floe authenticated %d times, %d in its first second", auths.Load(), initial)
}

// TestSecureAuthorizationErrors runs floe as a user lacking one ACL of
// docs/secured-kafka.md at a time: each run exits 2 within seconds with one
// line naming the principal, the operation, the resource and the ACL to
// add.
func TestSecureAuthorizationErrors(t *testing.T) {
	const topic, group = "orders", "floe-orders"
	all := leastPrivilege(topic, group)
	without := func(op kmsg.ACLOperation, res kmsg.ACLResourceType) []kfake.ACL {
		var out []kfake.ACL
		for _, a := range all {
			if a.Operation != op || a.Resource != res {
				out = append(out, a)
			}
		}
		return out
	}
	// Describe alone instead of Read: the sink describes the topic, then
	// cannot fetch.
	describeOnly := append(without(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic), allow(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationDescribe))
	for _, tc := range []struct {
		name string
		acls []kfake.ACL
		args []string
		want string
	}{
		{"no topic ACL", without(kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic),
			[]string{"sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"},
			"User:floe is not allowed to Describe topic orders (TOPIC_AUTHORIZATION_FAILED); add the ACL: kafka-acls.sh --add --allow-principal User:floe --operation Describe --topic orders"},
		{"describe only", describeOnly,
			[]string{"sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"},
			"User:floe is not allowed to Read topic orders (TOPIC_AUTHORIZATION_FAILED); add the ACL: kafka-acls.sh --add --allow-principal User:floe --operation Read --topic orders"},
		{"no describe configs", without(kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic),
			[]string{"audit", "--table", "lake.orders", "--verify-content"},
			"User:floe is not allowed to DescribeConfigs topic orders (TOPIC_AUTHORIZATION_FAILED); add the ACL: kafka-acls.sh --add --allow-principal User:floe --operation DescribeConfigs --topic orders"},
		{"no group", without(kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup),
			[]string{"sink", "--topic", topic, "--table", "lake.orders", "--group", group},
			"User:floe is not allowed to Read group floe-orders (GROUP_AUTHORIZATION_FAILED); add the ACL: kafka-acls.sh --add --allow-principal User:floe --operation Read --group floe-orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startSecureCluster(t, false, kfake.EnableACLs(), kfake.User("SCRAM-SHA-512", floeUser, floePass, tc.acls...))
			c.topic(t, topic, 1, 10)
			_, catFlags := localCatalog(t)
			if tc.args[0] == "audit" {
				// A table to audit, sunk by the superuser.
				mustFloe(t, append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"},
					append(c.userFlags("SCRAM-SHA-512", adminUser, adminPass), catFlags...)...)...)
			}
			start := time.Now()
			code, out, errs := floe(t, append(append(tc.args, c.userFlags("SCRAM-SHA-512", floeUser, floePass)...), append(catFlags, "--log-level", "debug")...)...)
			took := time.Since(start)
			noSecret(t, out, errs)
			last := errorLine(errs)
			t.Log(last)
			if code != 2 || !strings.Contains(last, tc.want) || took > 10*time.Second {
				t.Errorf("exit %d after %s, last line:\n%s\nwant exit 2 within 10s with:\n%s\nstderr:\n%s", code, took.Round(time.Millisecond), last, tc.want, errs)
			}
		})
	}
}

// errorLine is the line floe wrote its error on.
func errorLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "floe: ") {
			return l
		}
	}
	return ""
}

// TestSecureMechanisms sinks over every SASL mechanism kfake serves and
// over mutual TLS, given each way floe takes them: flags, a Kafka client
// properties file (--kafka-config) with a flag overriding it, and FLOE_
// variables.
func TestSecureMechanisms(t *testing.T) {
	const topic = "orders"
	for _, tc := range []struct {
		name, mechanism string
		mutual          bool
		args            func(t *testing.T, c *secureCluster, dir string) []string
	}{
		{"PLAIN flags", "PLAIN", false, func(t *testing.T, c *secureCluster, _ string) []string {
			return c.userFlags("PLAIN", floeUser, floePass)
		}},
		{"SCRAM-SHA-256 properties file, password flag over it", "SCRAM-SHA-256", false, func(t *testing.T, c *secureCluster, dir string) []string {
			props := filepath.Join(dir, "client.properties")
			writeFile(t, props, "# as the Java client reads it\nbootstrap.servers="+c.brokers[0]+"\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"+
				"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    username=\""+floeUser+"\" password=\"stale-password\";\n"+
				"ssl.ca.location="+c.certs.CAFile+"\n")
			return []string{"--brokers", c.brokers[0], "--kafka-config", props, "--kafka-sasl-password", floePass}
		}},
		{"SCRAM-SHA-512 environment", "SCRAM-SHA-512", false, func(t *testing.T, c *secureCluster, _ string) []string {
			t.Setenv("FLOE_KAFKA_TLS_CA", c.certs.CAFile)
			t.Setenv("FLOE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
			t.Setenv("FLOE_KAFKA_SASL_USER", floeUser)
			t.Setenv("FLOE_KAFKA_SASL_PASSWORD", floePass)
			return []string{"--brokers", c.brokers[0]}
		}},
		{"mutual TLS with SCRAM-SHA-512 properties file", "SCRAM-SHA-512", true, func(t *testing.T, c *secureCluster, dir string) []string {
			props := filepath.Join(dir, "client.properties")
			// librdkafka's names (sasl.mechanisms, from a new-user run).
			writeFile(t, props, "security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username="+floeUser+"\nsasl.password="+floePass+"\n"+
				"ssl.ca.location="+c.certs.CAFile+"\nssl.certificate.location="+c.certs.CertFile+"\nssl.key.location="+c.certs.KeyFile+"\n")
			return []string{"--brokers", c.brokers[0], "--kafka-config", props}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startSecureCluster(t, tc.mutual, kfake.User(tc.mechanism, floeUser, floePass))
			count := c.topic(t, topic, 2, 25)
			cat, catFlags := localCatalog(t)
			args := append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end", "--log-level", "debug"}, catFlags...)
			code, out, errs := floe(t, append(args, tc.args(t, c, t.TempDir())...)...)
			noSecret(t, out, errs)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errs)
			}
			checkTable(t, cat, "lake.orders", topic, count)
		})
	}
}

// TestSecureFailures: each way a secured connection goes wrong exits 2
// within seconds with one line naming the cause and the flag to fix, and
// no secret in any output at debug level.
func TestSecureFailures(t *testing.T) {
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-512", floeUser, floePass))
	mutual := startSecureCluster(t, true, kfake.User("SCRAM-SHA-512", floeUser, floePass))
	plain, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	other, err := localstack.WriteCerts(filepath.Join(t.TempDir(), "other"), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	flags := c.userFlags("SCRAM-SHA-512", floeUser, floePass)
	with := func(base []string, kv ...string) []string {
		out := append([]string(nil), base...)
		for i := 0; i < len(kv); i += 2 {
			found := false
			for j := range out {
				if out[j] == kv[i] {
					out[j+1], found = kv[i+1], true
				}
			}
			if !found {
				out = append(out, kv[i], kv[i+1])
			}
		}
		return out
	}
	const token = "token-Secret-55aa01"
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"wrong password", with(flags, "--kafka-sasl-password", "wrong-Secret-0e0e"),
			[]string{`authentication as SCRAM-SHA-512 user "floe" failed (wrong user or password`, "check --kafka-sasl-user and --kafka-sasl-password"}},
		{"untrusted certificate", with(flags, "--kafka-tls-ca", other.CAFile),
			[]string{"certificate is signed by a CA floe does not trust", "check --kafka-tls-ca"}},
		{"mismatched server name", with(flags, "--kafka-tls-server-name", "kafka.example.com"),
			[]string{"certificate is not valid for the name kafka.example.com", "check --kafka-tls-server-name"}},
		// A Kafka broker closes a plaintext port on a TLS hello; kfake
		// waits for more bytes, so the handshake times out.
		{"TLS against a plaintext port", with(flags, "--brokers", plain.Brokers[0], "--dial-timeout", "3s"),
			[]string{"no TLS session with the brokers in time (a plaintext listener, or unreachable?)", "check --kafka-tls and --brokers"}},
		{"plaintext against a TLS port", []string{"--brokers", c.brokers[0]},
			[]string{"require TLS on this port", "check --kafka-tls and --kafka-tls-ca"}},
		{"TLS without SASL", []string{"--brokers", c.brokers[0], "--kafka-tls-ca", c.certs.CAFile},
			[]string{"(they may require SASL)", "check --kafka-sasl-mechanism"}},
		{"mutual TLS without a client certificate", with(flags, "--brokers", mutual.brokers[0], "--kafka-tls-ca", mutual.certs.CAFile),
			[]string{"the brokers require a client certificate (mutual TLS)", "check --kafka-tls-cert and --kafka-tls-key"}},
		// kfake closes the connection on a mechanism it does not serve,
		// as on a wrong password (from a new-user run).
		{"PLAIN against a SCRAM broker", with(flags, "--kafka-sasl-mechanism", "PLAIN"),
			[]string{`authentication as PLAIN user "floe" failed`, "a SASL mechanism the brokers do not accept", "--kafka-sasl-mechanism"}},
		// The SASL flags against a listener without SASL: kfake closes
		// the connection, as on a wrong password, and the message says it
		// may be that too (from a new-user run).
		{"SASL against a plaintext listener", []string{"--brokers", plain.Brokers[0], "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", floeUser, "--kafka-sasl-password", floePass},
			[]string{"failed (wrong user or password", "or a listener without SASL", "--kafka-sasl-mechanism"}},
		{"mechanism the broker lacks", with(flags, "--kafka-sasl-mechanism", "OAUTHBEARER", "--kafka-sasl-token", token),
			[]string{"do not accept SASL mechanism OAUTHBEARER", "check --kafka-sasl-mechanism"}},
		{"unknown mechanism", with(flags, "--kafka-sasl-mechanism", "GSSAPI"),
			[]string{`--kafka-sasl-mechanism "GSSAPI": want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, catFlags := localCatalog(t)
			start := time.Now()
			args := append(append([]string{"sink", "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--log-level", "debug"}, catFlags...), tc.flags...)
			code, out, errs := floe(t, args...)
			took := time.Since(start)
			line := errorLine(errs)
			t.Log(line)
			for _, o := range []string{out, errs} {
				for _, secret := range []string{floePass, "wrong-Secret-0e0e", token} {
					if strings.Contains(o, secret) {
						t.Errorf("output holds a secret:\n%s", o)
					}
				}
			}
			ok := code == 2 && took < 10*time.Second
			for _, w := range tc.want {
				ok = ok && strings.Contains(line, w)
			}
			if !ok {
				t.Errorf("exit %d after %s, error line:\n%s\nwant exit 2 within 10s with %q\nstderr:\n%s", code, took.Round(time.Millisecond), line, tc.want, errs)
			}
		})
	}
}

// TestLocalstackUpSecure starts 'floe localstack up --secure': the broker
// takes TLS with SCRAM-SHA-512 only, the printed usage names the flags
// (the password read from its file, never printed),
// floe sinks through the written floe.yaml and through the written client
// properties file, a plaintext client is told to use TLS, and a restart
// keeps the CA and the password that clients were configured with.
func TestLocalstackUpSecure(t *testing.T) {
	dir := t.TempDir()
	l, opts := upOnFreePorts(t, localstack.UpOptions{Dir: dir, Secure: true})
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	var usage strings.Builder
	printLocalUsage(&usage, l)
	// The password goes by the variable, not a flag: a flag's value is in
	// the process list (from a new-user run).
	wantFlags := fmt.Sprintf(`--kafka-tls-ca %s --kafka-sasl-mechanism SCRAM-SHA-512 --kafka-sasl-user floe`+"\n", l.Certs.CAFile)
	wantEnv := fmt.Sprintf(`export FLOE_KAFKA_SASL_PASSWORD="$(cat %q)"`, filepath.Join(dir, "tls", "password"))
	if !strings.Contains(usage.String(), wantFlags) || !strings.Contains(usage.String(), wantEnv) || strings.Contains(usage.String(), "--kafka-sasl-password") || strings.Contains(usage.String(), l.Password) {
		t.Errorf("usage lacks %q and %q, names the password flag or prints the password:\n%s", wantFlags, wantEnv, usage.String())
	}
	// env.sh reads the password from its file too, as the usage says
	// (from an operator's run: it held the password itself), and works.
	envSh := filepath.Join(dir, "env.sh")
	if b, err := os.ReadFile(envSh); err != nil || !strings.Contains(string(b), wantEnv) || strings.Contains(string(b), l.Password) {
		t.Errorf("env.sh (%v):\n%s", err, b)
	}
	if out, err := exec.Command("sh", "-c", ". "+envSh+" && printf %s \"$FLOE_KAFKA_SASL_PASSWORD\"").Output(); err != nil || string(out) != l.Password {
		t.Errorf("env.sh's password reads %q (%v)", out, err)
	}
	// The printed lines work in a shell: the variable's password is the stack's.
	if out, err := exec.Command("sh", "-c", "printf %s "+wantEnv[strings.Index(wantEnv, `"$(`):]).Output(); err != nil || string(out) != l.Password {
		t.Errorf("the printed password reference reads %q (%v)", out, err)
	}
	// kcat (librdkafka) cannot log in to kfake's SASL (it needs handshake
	// v0): the usage says so instead of printing a plaintext kcat command.
	if plain := "kcat -b " + l.Brokers[0] + " -t orders -P -K:"; strings.Contains(usage.String(), plain) || !strings.Contains(usage.String(), "SASL handshake v0") {
		t.Errorf("usage of the secured stack offers a plaintext kcat command, or does not say why kcat cannot log in:\n%s", usage.String())
	}
	admin := []kgo.Opt{kgo.DialTLSConfig(caTLS(t, l.Certs.CAFile)), kgo.SASL(scram.Auth{User: localstack.SecureUser, Pass: l.Password}.AsSha512Mechanism())}
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 2, nil, admin...); err != nil {
		t.Fatal(err)
	}
	sc := &secureCluster{brokers: l.Brokers, certs: l.Certs, admin: admin}
	count := sc.produce(t, "orders", 2, 20, map[int32]int64{})
	// The sink line the usage prints works as printed: it carried none of
	// the Kafka flags (from a new-user run).
	var sinkLine []string
	for _, line := range strings.Split(usage.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "floe" && f[1] == "sink" {
			sinkLine = f[1:]
		}
	}
	if !slices.Contains(sinkLine, "--config") {
		t.Fatalf("the usage's floe sink line %q does not carry the stack's Kafka security", sinkLine)
	}
	mustFloe(t, append(sinkLine, "--stop-at-end")...)
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)

	code, _, errs := floe(t, "sink", "--brokers", l.Brokers[0], "--catalog", l.CatalogPath(), "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if line := errorLine(errs); code != 2 || !strings.Contains(line, "the brokers require TLS on this port") {
		t.Errorf("plaintext client: exit %d, %s", code, line)
	}
	password := l.Password
	l.Close()

	l, err := localstack.Up(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Password != password {
		t.Errorf("restart changed the password")
	}
	count = sc.produce(t, "orders", 2, 5, count)
	props := filepath.Join(dir, "tls", "client.properties")
	mustFloe(t, "sink", "--kafka-config", props, "--brokers", l.Brokers[0], "--catalog", l.CatalogPath(), "--warehouse", l.Warehouse(),
		"--s3-endpoint", l.S3.Endpoint, "--s3-access-key-id", localstack.AccessKeyID, "--s3-secret-access-key", localstack.SecretAccessKey, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)
}

// TestLocalstackUpSecureAfterPlain follows the README's walkthrough into
// docs/secured-kafka.md on one folder: a plain 'floe localstack up' sinks a
// topic, the stack is restarted with --secure on the same folder, and the
// printed config file's sink resumes over TLS and SCRAM. The broker's
// persisted user list, empty from the plain run, used to replace the
// secured stack's user, so every login failed ("authentication as
// SCRAM-SHA-512 user floe failed").
func TestLocalstackUpSecureAfterPlain(t *testing.T) {
	dir := t.TempDir()
	l, opts := upOnFreePorts(t, localstack.UpOptions{Dir: dir})
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, l.Brokers, "orders", 2, 30, count)
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "floe.yaml")
	mustFloe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	l.Close()

	opts.Secure = true
	l, err := localstack.Up(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	admin := []kgo.Opt{kgo.DialTLSConfig(caTLS(t, l.Certs.CAFile)), kgo.SASL(scram.Auth{User: localstack.SecureUser, Pass: l.Password}.AsSha512Mechanism())}
	sc := &secureCluster{brokers: l.Brokers, certs: l.Certs, admin: admin}
	code, out, errs := floe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if code != exitOK || !strings.Contains(out, "0 rows") {
		t.Fatalf("sink through the secured stack's floe.yaml, on the plain stack's folder: exit %d\n%s%s", code, out, errorLine(errs))
	}
	count = sc.produce(t, "orders", 2, 5, count)
	if out := mustFloe(t, "sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"); !strings.Contains(out, "10 rows") {
		t.Errorf("the secured sink should add exactly the 10 new records, got:\n%s", out)
	}
	checkTable(t, l.Catalog(), "lake.orders", "orders", count)
}

// caTLS is a client TLS configuration trusting the CA in file.
func caTLS(t *testing.T, file string) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool}
}

// readerDescriberCluster is a cluster with ACLs where user "reader" may
// only Read topic and user "describer" only Describe it.
func readerDescriberCluster(t *testing.T, topic string) *secureCluster {
	t.Helper()
	return startSecureCluster(t, false, kfake.EnableACLs(),
		kfake.User("SCRAM-SHA-512", "reader", floePass, allow(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationRead)),
		kfake.User("SCRAM-SHA-512", "describer", floePass, allow(kmsg.ACLResourceTypeTopic, topic, kmsg.ACLOperationDescribe)))
}

// TestSecureReadOnlyACLs runs the commands of docs/secured-kafka.md's ACL
// table as users holding only their row: Read on the topic for the static
// sink and a replay, Describe alone for the broker-level audit, where,
// as-of and status.
func TestSecureReadOnlyACLs(t *testing.T) {
	const topic = "orders"
	c := readerDescriberCluster(t, topic)
	count := c.topic(t, topic, 2, 20)
	cat, catFlags := localCatalog(t)
	as := func(user string, args ...string) string {
		t.Helper()
		code, out, errs := floe(t, append(append(args, c.userFlags("SCRAM-SHA-512", user, floePass)...), catFlags...)...)
		noSecret(t, out, errs)
		if code != 0 {
			t.Fatalf("floe %s as %s: exit %d\n%s\n%s", args[0], user, code, out, errs)
		}
		return out
	}
	as("reader", "sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end")
	checkTable(t, cat, "lake.orders", topic, count)
	as("reader", "replay", "--topic", topic, "--table", "lake.orders_rebuilt")
	checkTable(t, cat, "lake.orders_rebuilt", topic, count)
	if out := as("describer", "audit", "--table", "lake.orders"); !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("broker-level audit as describer:\n%s", out)
	}
	as("describer", "status", "--table", "lake.orders")
	as("describer", "where", "--table", "lake.orders", "--topic", topic, "--partition", "1", "--offset", "7")
	as("describer", "as-of", "--table", "lake.orders", "--offsets", "0=5,1=5")
}

// TestSecureRotatedPassword changes floe's SCRAM password on the broker
// while a live sink runs (at debug log level, --retry-for 5s) and the
// broker has sessions re-authenticated: the sink logs one ERROR line that
// the brokers refuse its authentication, then exits 2 within bounded time
// naming --kafka-sasl-user and --kafka-sasl-password, with no password in
// its output; a sink started with the new password resumes from the
// ledger and completes the table, every offset once. (kfake answers the
// refused re-authentication by closing the connection, which franz-go
// retries without end; a Kafka broker answers SASL_AUTHENTICATION_FAILED,
// which this test cannot produce.)
func TestSecureRotatedPassword(t *testing.T) {
	const topic, rotatedPass = "orders", "rotated-Secret-1a1a"
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-512", floeUser, floePass),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "3000"}))
	count := c.topic(t, topic, 1, 20)
	cat, catFlags := localCatalog(t)
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := floe(t, append(append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--flush-interval", "200ms",
			"--retry-for", "5s", "--log-level", "debug"}, c.userFlags("SCRAM-SHA-512", floeUser, floePass)...), catFlags...)...)
		done <- result{code, stdout, stderr}
	}()
	waitFor(t, 10*time.Second, "the sink to commit the first records", func() bool {
		return sunkTo(t, cat, "lake.orders", topic, 0) == count[0]
	})
	adm := kadm.NewClient(mustClient(t, c.brokers, c.admin))
	res, err := adm.AlterUserSCRAMs(t.Context(), nil, []kadm.UpsertSCRAM{{User: floeUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: rotatedPass}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	count = c.produce(t, topic, 1, 10, count)
	var r result
	select {
	case r = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the sink whose password was rotated still runs 40 s later (re-authentication every 3 s, --retry-for 5s)")
	}
	if r.code != exitError {
		t.Errorf("sink whose password was rotated: exit %d, want %d\nstderr:\n%s", r.code, exitError, r.stderr)
	}
	if n := strings.Count(r.stderr, "the brokers refuse SASL authentication as User:"+floeUser); n != 1 {
		t.Errorf("%d ERROR lines about the refused authentication, want 1:\n%s", n, r.stderr)
	}
	if line := errorLine(r.stderr); !strings.Contains(line, "refused SASL authentication") || !strings.Contains(line, "--kafka-sasl-user") || !strings.Contains(line, "--kafka-sasl-password") {
		t.Errorf("error line %q does not name the refusal and the flags", line)
	}
	noSecret(t, r.stdout, r.stderr)
	if strings.Contains(r.stdout+r.stderr, rotatedPass) {
		t.Error("output holds the rotated password")
	}
	mustFloe(t, append(append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"},
		c.userFlags("SCRAM-SHA-512", floeUser, rotatedPass)...), catFlags...)...)
	checkTable(t, cat, "lake.orders", topic, count)
}

// mustClient is a franz-go client of brokers with opts, closed with the
// test.
func mustClient(t *testing.T, brokers []string, opts []kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// sunkTo is the next offset of partition p of topic in the ledger of
// table, -1 while the table does not exist.
func sunkTo(t *testing.T, cfg catalog.Config, table, topic string, p int32) int64 {
	t.Helper()
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		return -1
	}
	ident, err := catalog.ParseIdent(table)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{})
	if err != nil {
		return -1
	}
	ledger, err := tbl.Ledger()
	if err != nil {
		return -1
	}
	return mapping.Cover(ledger.Ranges(mapping.TopicPartition{Topic: topic, Partition: p})).Next
}

// TestKafkaConfigFileErrors: a client properties file floe cannot use is
// refused before any connection, with one line naming the file, the line,
// the key and what would do, and never the password it holds.
func TestKafkaConfigFileErrors(t *testing.T) {
	const jaas = `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="floe" password="` + floePass + `";`
	for _, tc := range []struct{ name, body, want string }{
		{"java key store", "security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n",
			"line 2: ssl.truststore.location: floe reads PEM files, not Java key stores: export them (keytool -exportcert -rfc, openssl pkcs12)"},
		{"login module of another mechanism", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n" + jaas + "\n",
			"line 3: sasl.jaas.config: login module org.apache.kafka.common.security.scram.ScramLoginModule does not serve sasl.mechanism PLAIN: want a PlainLoginModule"},
		{"malformed options", "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"floe\" " + floePass + ";\n",
			`line 3: sasl.jaas.config: after username: want KEY="VALUE"`},
		{"kerberos", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n",
			`line 2: sasl.mechanism: "GSSAPI": floe supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM (Kerberos, GSSAPI, is not supported)`},
		{"SASL without a SASL protocol", "security.protocol=SSL\nsasl.mechanism=PLAIN\n",
			`line 2: sasl.mechanism: PLAIN needs security.protocol SASL_SSL or SASL_PLAINTEXT (it is "SSL")`},
		// From a new-user run: a misspelt key was ignored, and a missing
		// mechanism was "line 0: sasl.mechanism: \"\"".
		{"misspelt key", "security.protocol=SSL\nssl.ca.locaton=/etc/ca.pem\n",
			"line 2: ssl.ca.locaton is not a setting floe reads; did you mean ssl.ca.location?"},
		{"no mechanism", "security.protocol=SASL_SSL\nbootstrap.servers=k:9092\n",
			": sasl.mechanism is not set: security.protocol SASL_SSL needs one: floe supports PLAIN"},
		// It said "missing --kafka-sasl-user", a flag the user never gave.
		{"no user", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n",
			"line 2 (sasl.mechanism): PLAIN needs a user and a password: set sasl.username and sasl.password there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := filepath.Join(t.TempDir(), "client.properties")
			writeFile(t, props, tc.body)
			_, catFlags := localCatalog(t)
			code, out, errs := floe(t, append([]string{"sink", "--brokers", "127.0.0.1:1", "--kafka-config", props, "--topic", "orders", "--table", "lake.orders", "--log-level", "debug"}, catFlags...)...)
			noSecret(t, out, errs)
			want := "floe: --kafka-config " + props + " " + tc.want
			if strings.HasPrefix(tc.want, ":") {
				want = "floe: --kafka-config " + props + tc.want
			}
			if line := errorLine(errs); code != 2 || !strings.HasPrefix(line, want) {
				t.Errorf("exit %d, error line\n%s\nwant exit 2 and a line starting\n%s", code, line, want)
			}
		})
	}
}

// TestSecurePipelinesConfig sinks the pipelines of a config file that
// also holds the Kafka security keys (the flag names without dashes), as
// floe.yaml in production would, with the password from the environment.
func TestSecurePipelinesConfig(t *testing.T) {
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-256", floeUser, floePass))
	orders := c.topic(t, "orders", 2, 15)
	payments := c.topic(t, "payments", 1, 10)
	cat, _ := localCatalog(t)
	conf := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, conf, fmt.Sprintf(`brokers: [%s]
catalog: %s
warehouse: %s
kafka-tls-ca: %s
kafka-sasl-mechanism: SCRAM-SHA-256
kafka-sasl-user: %s
pipelines:
  - topic: orders
    table: lake.orders
  - topic: payments
    table: lake.payments
`, c.brokers[0], cat.Catalog, cat.Warehouse, c.certs.CAFile, floeUser))
	t.Setenv("FLOE_KAFKA_SASL_PASSWORD", floePass)
	code, out, errs := floe(t, "sink", "--config", conf, "--stop-at-end", "--log-level", "debug")
	noSecret(t, out, errs)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	checkTable(t, cat, "lake.orders", "orders", orders)
	checkTable(t, cat, "lake.payments", "payments", payments)
}

// TestKafkaConfigNamesItsLines: an error about a setting the properties
// file gave names the file's line besides the flag (it named only the
// flag, which the user never gave): a CA file that cannot be read, and a
// password the brokers refuse.
func TestKafkaConfigNamesItsLines(t *testing.T) {
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-256", floeUser, floePass))
	_, catFlags := localCatalog(t)
	dir := t.TempDir()
	props := filepath.Join(dir, "client.properties")
	sink := append([]string{"sink", "--brokers", c.brokers[0], "--kafka-config", props, "--topic", "orders", "--table", "lake.orders", "--dial-timeout", "5s"}, catFlags...)

	writeFile(t, props, "security.protocol=SSL\nssl.ca.location="+filepath.Join(dir, "gone.pem")+"\n")
	code, _, errs := floe(t, sink...)
	if line := errorLine(errs); code != 2 || !strings.Contains(line, "readable PEM file") || !strings.Contains(line, "--kafka-tls-ca was set by --kafka-config "+props+" line 2 (ssl.ca.location)") {
		t.Errorf("unreadable CA: exit %d, %s", code, line)
	}

	writeFile(t, props, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nssl.ca.location="+c.certs.CAFile+"\n"+
		"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\""+floeUser+"\" password=\"stale-password\";\n")
	code, out, errs := floe(t, sink...)
	noSecret(t, out, errs)
	if line := errorLine(errs); code != 2 || !strings.Contains(line, "wrong user or password") ||
		!strings.Contains(line, "--kafka-sasl-password was set by --kafka-config "+props+" line 4 (sasl.jaas.config)") {
		t.Errorf("refused password: exit %d, %s", code, line)
	}
}

// TestLocalstackUpSecurePlaintextPort (from a new user's run): a secured
// local stack took TLS and SASL only, and kcat cannot log in to kfake, so
// producing new records with it meant stopping the stack and starting it
// again without --secure. Its plaintext port takes them: the usage's kcat
// line and a franz-go producer (idempotent, following the addresses the
// metadata gives) produce there, floe sinks the records through the
// secured port by floe.yaml, and a request that is no producer's is
// refused on the plaintext port.
func TestLocalstackUpSecurePlaintextPort(t *testing.T) {
	kcat := testenv.Tool(t, "kcat", "apt-get install kcat")
	dir := t.TempDir()
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: dir, Secure: true})
	t.Cleanup(l.Close)
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	var usage strings.Builder
	printLocalUsage(&usage, l)
	kcatLine := "kcat -b " + l.Plaintext + " -t orders -P -K:"
	if l.Plaintext == "" || !strings.Contains(usage.String(), "plaintext port    "+l.Plaintext+"   for local producing only") || !strings.Contains(usage.String(), kcatLine) {
		t.Fatalf("usage of the secured stack lacks its plaintext port %q and the kcat line %q:\n%s", l.Plaintext, kcatLine, usage.String())
	}
	cmd := exec.CommandContext(t.Context(), kcat, strings.Fields(kcatLine)[1:]...)
	cmd.Stdin = strings.NewReader("k1:{\"amount\":1}\nk2:{\"amount\":2}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", kcatLine, err, out)
	}
	recs := make([]*kgo.Record, 8)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "g%d", i), Value: fmt.Appendf(nil, `{"amount":%d}`, i)}
	}
	if err := localstack.Produce(t.Context(), []string{l.Plaintext}, recs); err != nil {
		t.Fatalf("franz-go producer on the plaintext port: %v", err)
	}
	mustFloe(t, "sink", "--config", filepath.Join(dir, "floe.yaml"), "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	checkTable(t, l.Catalog(), "lake.orders", "orders", map[int32]int64{0: 10})

	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Plaintext))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).ListEndOffsets(ctx, "orders"); err == nil {
		t.Errorf("the plaintext port answered ListOffsets, which no producer sends: it takes producers only")
	}
}

// TestLocalstackPlaintextPortNeedsSecure: --plaintext-port without
// --secure is refused, where the stack started and the port asked for
// never opened.
func TestLocalstackPlaintextPortNeedsSecure(t *testing.T) {
	// A stack that starts runs until ctx ends; its ports are of the range
	// tests may fix.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, _, err := floeCtx(ctx, "localstack", "up", "--dir", t.TempDir(), "--plaintext-port", "36001",
		"--kafka-port", "36002", "--s3-port", "36003", "--schema-registry-port", "36004")
	if err == nil || !strings.Contains(err.Error(), "--plaintext-port") || !strings.Contains(err.Error(), "without --secure") {
		t.Errorf("floe localstack up --plaintext-port without --secure: %v, want an error naming --plaintext-port and --secure\n%s", err, out)
	}
}
