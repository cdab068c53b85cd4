package main

import (
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/connector"
)

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
