package main

import (
	"errors"
	"fmt"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// decodeFlags say how records become rows: the value and key modes, the
// dead-letter table, and the schema registry.
type decodeFlags struct {
	value, key       string
	keepRawValue     bool
	dlqTable         string
	dlq              string
	onSchemaConflict string
	envelope         string
	onTruncate       string
	placeholder      string
	registryFlags
}

func (f *decodeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.value, "value", "",
		"how values become columns: raw (one binary column), json (schemaless JSON objects, columns inferred) or registry (Avro, Protobuf or JSON Schema in the schema registry's wire format); "+
			"a new table gets it (default raw); an existing table keeps its own, and another value is refused (left out, the table's is used)")
	fs.StringVar(&f.key, "key", "",
		"how keys become the kafka_key column: raw (binary), string (UTF-8 text), json or registry (a decoded struct); a new table gets it (default raw); an existing table keeps its own, and another value is refused (left out, the table's is used)")
	fs.BoolVar(&f.keepRawValue, "keep-raw-value", false,
		"with --value json or registry, also keep each value's bytes in the binary column kafka_value (a new table only)")
	fs.StringVar(&f.dlqTable, "dlq-table", "",
		"dead-letter table of records that cannot become rows, `NAMESPACE.TABLE`; created when missing, and recorded by the table, so that a later run without the flag writes there too (default: the one the table records, else the table's name with _dlq; a replay onto a branch: TABLE_BRANCH_dlq)")
	fs.StringVar(&f.dlq, "dlq", "on",
		"on: records that cannot become rows (malformed, unknown schema, type conflict) go to the dead-letter table; off: the first one stops the sink, after committing what came before it")
	fs.StringVar(&f.onSchemaConflict, "on-schema-conflict", string(connector.ConflictDeadLetter),
		"when a record's type cannot be added to the table's schema (narrowing, string to int): dead-letter it, or fail (stop before it)")
	fs.StringVar(&f.envelope, "envelope", "",
		"debezium: values are Debezium change events (with --value json, with or without the JSON converter's schema, or registry, and --key json or registry): "+
			"the table holds the after image of each key (an upsert table), deletes remove it; a new table gets it (default none), an existing table keeps its own")
	fs.StringVar(&f.onTruncate, "on-truncate", "",
		"with --envelope debezium, what a truncate event (op t) does: dead-letter it (the table keeps its rows), or delete-all (every row of the table is deleted in its commit); the table records it, and a run without the flag does what the table records (default dead-letter)")
	fs.StringVar(&f.placeholder, "unavailable-placeholder", "",
		"with --envelope debezium, the connector's unavailable.value.placeholder when it is not Debezium's default (__debezium_unavailable_value): `TEXT`, or hex: and its bytes; an event holding it (an unchanged TOASTed value) is a dead letter; the table records it, and a run without the flag uses what the table records")
	f.registryFlags.register(fs)
}

// layout is the table layout the flags ask for: the zero Layout when none
// of them was given, so that an existing table keeps its own.
func (f *decodeFlags) layout() (mapping.Layout, error) {
	envelope, err := mapping.ParseEnvelope(f.envelope)
	if err != nil {
		return mapping.Layout{}, fmt.Errorf("--envelope %q: want none or debezium", f.envelope)
	}
	if f.value == "" && f.key == "" && envelope == mapping.EnvelopeNone {
		// --keep-raw-value alone still asks for the bytes: a table without
		// them refuses it rather than ignoring it.
		return mapping.Layout{RawValue: f.keepRawValue}, nil
	}
	if envelope != mapping.EnvelopeNone && (f.value == "" || f.key == "") {
		// Refused for a new table; an existing table answers with its
		// own envelope first (pipeline).
		return mapping.Layout{Value: mapping.ValueMode(f.value), Key: mapping.KeyMode(f.key), RawValue: f.keepRawValue, Envelope: envelope},
			&envelopeModesError{envelope: envelope}
	}
	// A mode left out stays empty: an existing table keeps its own, a new
	// one gets the default (snapshot.Open fills it in).
	l := mapping.Layout{Value: mapping.ValueMode(f.value), Key: mapping.KeyMode(f.key), RawValue: f.keepRawValue, Envelope: envelope}
	check := l
	if err := check.Normalize(); err != nil {
		return l, err
	}
	return l, nil
}

// envelopeModesError refuses an envelope given without the value and key
// modes, for a new table: an existing one has its own.
type envelopeModesError struct{ envelope mapping.Envelope }

func (e *envelopeModesError) Error() string {
	return fmt.Sprintf("--envelope %s needs --value and --key, each json (Kafka Connect's JsonConverter) or registry (Avro, Protobuf or JSON Schema), as the connector's converters write the events", e.envelope)
}

// pipeline completes p with the flags: its layout (the config file's
// pipeline may name its own value and key modes and envelope),
// dead-letter table and conflict policy.
func (f *decodeFlags) pipeline(p *connector.Pipeline, from pipeline, reg *connector.Registry) error {
	g := *f
	if from.Value != "" {
		g.value = from.Value
	}
	if from.Key != "" {
		g.key = from.Key
	}
	if from.Envelope != "" {
		g.envelope = from.Envelope
	}
	// An error about a config file's pipeline is named by the caller,
	// in the file's terms (pipelineSource).
	l, err := g.layout()
	if _, ok := errors.AsType[*envelopeModesError](err); ok {
		// For a new table: an existing table judges the envelope by its
		// own, and fills in the modes (connector's open).
		p.NewTableRefusal, err = err, nil
	}
	if err != nil {
		return err
	}
	if l.UsesRegistry() && reg == nil {
		// Checked here, before a table of that layout is created.
		return &connector.ConfigError{Setting: connector.SettingRegistry, Want: "the URL of the schema registry that decodes --value registry or --key registry"}
	}
	p.Layout = l
	p.Config.EnvelopeGiven = g.envelope != ""
	p.Config.Registry = reg
	p.Config.OnSchemaConflict = connector.SchemaConflict(f.onSchemaConflict)
	p.Config.OnTruncate = connector.OnTruncate(f.onTruncate)
	p.Config.UnavailablePlaceholder = f.placeholder
	switch f.dlq {
	case "on":
	case "off":
		p.NoDeadLetters = true
	default:
		return fmt.Errorf("--dlq %q: want on or off", f.dlq)
	}
	if f.dlqTable != "" {
		var ident table.Identifier
		if ident, err = catalog.ParseIdent(f.dlqTable); err != nil {
			return fmt.Errorf("--dlq-table: %w", err)
		}
		p.DeadLetters = ident
	}
	return nil
}

// registryFlags say how to reach a Confluent-compatible schema registry,
// whose schemas decode keys and values in its wire format.
type registryFlags struct {
	url      string
	user     string
	password string
	token    string
	ca       string
}

func (f *registryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "schema-registry", "",
		"Confluent-compatible schema registry URL, http(s)://HOST:PORT[,URL...] (Confluent, Redpanda, Karapace, Apicurio's ccompat API)")
	fs.StringVar(&f.user, "schema-registry-user", "", "schema registry basic auth user (Confluent Cloud: the API key)")
	fs.StringVar(&f.password, "schema-registry-password", "",
		"schema registry basic auth password (prefer FLOE_SCHEMA_REGISTRY_PASSWORD: a flag shows in the process list)")
	fs.StringVar(&f.token, "schema-registry-token", "", "schema registry bearer token (prefer FLOE_SCHEMA_REGISTRY_TOKEN)")
	fs.StringVar(&f.ca, "schema-registry-ca", "", "PEM file of the CAs to trust for an https schema registry, instead of the system's")
}

// registry builds the client the flags describe, or nil without
// --schema-registry. It talks to no server yet.
func (f *registryFlags) registry() (*connector.Registry, error) {
	if f.url == "" {
		return nil, nil
	}
	return connector.NewRegistry(connector.RegistryConfig{
		URL: f.url, User: f.user, Password: f.password, Token: f.token, CAFile: f.ca,
	})
}
