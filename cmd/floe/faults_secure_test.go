//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/floe-dev/floe/localstack"
)

// brokerSASLSSLScenario is the broker scenario over SASL_SSL (issue 20):
// the broker serves TLS and SCRAM-SHA-512 with ACLs, and the members and
// the audit connect as a user holding exactly the ACLs of group mode in
// docs/secured-kafka.md, with the --kafka-* flags and the password in
// FLOE_KAFKA_SASL_PASSWORD, at debug log level. Each dropped connection
// and restart makes the members handshake and authenticate again, and the
// broker's sessions last 3 s, so that every connection re-authenticates
// (KIP-368) among the faults; no password may appear in any member's log
// or in the audit's output.
func brokerSASLSSLScenario(t *testing.T) verdict {
	t.Setenv("FLOE_KAFKA_SASL_PASSWORD", floePass)
	return brokerFaults(t, "broker over SASL_SSL (TLS, SCRAM-SHA-512, least-privilege ACLs, 3 s sessions): injected errors and delays, restart", startSecureFaultBroker)
}

// startSecureFaultBroker starts a fault broker serving TLS with a
// certificate for host, SASL with the superuser admin (the test's own
// clients) and the user floe holding the least-privilege ACLs of
// newCampaign's topic and group; its users and ACLs outlive restarts.
func startSecureFaultBroker(t *testing.T, host string, control func(*kfake.Cluster)) *faultBroker {
	t.Helper()
	certs, err := localstack.WriteCerts(filepath.Join(t.TempDir(), "tls"), host)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := certs.ServerTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	// floe's authentications, counted across restarts: SCRAM first
	// messages naming its user.
	var auths atomic.Int64
	counted := func(cl *kfake.Cluster) {
		cl.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
			cl.KeepControl()
			if strings.Contains(string(req.(*kmsg.SASLAuthenticateRequest).SASLAuthBytes), "n="+floeUser+",") {
				auths.Add(1)
			}
			return nil, nil, false
		})
		if control != nil {
			control(cl)
		}
	}
	t.Cleanup(func() { t.Logf("floe authenticated %d times", auths.Load()) })
	b := &faultBroker{t: t, dir: t.TempDir(), host: host, control: counted,
		opts: []kfake.Opt{kfake.TLS(tc), kfake.EnableSASL(), kfake.EnableACLs(),
			// Sessions of 3 s: every connection re-authenticates (KIP-368)
			// while requests fail, drop and stall around it.
			kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "3000"}),
			kfake.Superuser("SCRAM-SHA-512", adminUser, adminPass),
			kfake.User("SCRAM-SHA-512", floeUser, floePass, leastPrivilege("events", "floe-campaign")...)},
		clientOpts: []kgo.Opt{kgo.DialTLSConfig(caTLS(t, certs.CAFile)),
			kgo.SASL(scram.Auth{User: adminUser, Pass: adminPass}.AsSha512Mechanism())},
		floeArgs: []string{"--kafka-tls-ca", certs.CAFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", floeUser,
			"--log-level", "debug"},
		secrets: []string{adminPass, floePass}}
	b.start()
	t.Cleanup(b.stop)
	return b
}
