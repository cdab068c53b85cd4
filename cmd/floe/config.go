package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Configuration sources, strongest first: command-line flags, FLOE_*
// environment variables, the config file, the flags' defaults.
//
// The config file is YAML. Its keys are the flag names without the dashes
// (every flag of every command may appear; a command uses the keys it has
// flags for), plus "pipelines" for floe sink. A key that is no flag of any
// command is an error, so a typo never goes unnoticed. The environment
// variable of a flag is FLOE_ and its name in upper case with underscores:
// --s3-secret-access-key is FLOE_S3_SECRET_ACCESS_KEY. List flags take a
// comma-separated value there.
const (
	configEnv = "FLOE_CONFIG"
	envPrefix = "FLOE_"
)

// pipeline is one topic -> table of a config file's pipelines list.
type pipeline struct {
	Topic string `yaml:"topic"`
	Table string `yaml:"table"`
	// Partitions restricts the pipeline to these partitions; empty means all.
	Partitions []int32 `yaml:"partitions"`
	// Value, Key and Envelope override --value, --key and --envelope for
	// this pipeline: a Debezium topic and a plain one in one process.
	Value    string `yaml:"value"`
	Key      string `yaml:"key"`
	Envelope string `yaml:"envelope"`
	// Mode and IDColumns override --mode and --id-columns for this
	// pipeline.
	Mode      string   `yaml:"mode"`
	IDColumns []string `yaml:"id-columns"`
	// PartitionBy is the pipeline's table's partition spec; empty means
	// the partition-by key (or --partition-by) of all pipelines.
	PartitionBy string `yaml:"partition-by"`
}

// configFile is a parsed config file.
type configFile struct {
	path      string
	values    map[string][]string // flag name -> value(s)
	lines     map[string]int      // flag name -> line of its value, for errors
	pipelines []pipeline
	pipeLines []int // line of each pipeline, for errors
}

type configKey struct{}

// configFrom returns the config file loaded for this run, or nil.
func configFrom(ctx context.Context) *configFile {
	c, _ := ctx.Value(configKey{}).(*configFile)
	return c
}

// flagSources records, for one run, where each flag that was not given on
// the command line took its value (a FLOE_* variable, a config file's
// line), so that an error about the flag's value names where to fix it.
type flagSources map[string]string

type sourcesKey struct{}

// sourcesOf returns the run's flagSources: nil outside a run of main,
// where every flag came from the command line.
func sourcesOf(ctx context.Context) flagSources {
	src, _ := ctx.Value(sourcesKey{}).(flagSources)
	return src
}

// note returns, for an error message msg that names flags of s, where
// their values came from ("" when it names none).
func (s flagSources) note(msg string) string {
	var notes []string
	// The "; check --a and --b" that ends an error a flag's value may fix
	// is about those values too.
	var checked []string
	if i := strings.LastIndex(msg, "; check --"); i >= 0 {
		checked = strings.Split(msg[i+len("; check "):], " and ")
	}
	for _, name := range slices.Sorted(maps.Keys(s)) {
		if flagNamed(msg, name) || slices.Contains(checked, "--"+name) {
			notes = append(notes, fmt.Sprintf("--%s was set by %s", name, s[name]))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ")"
}

// flagNamed reports whether msg names flag --name with a value, as an
// error about that value does (--dlq "maybe": ..., --retry-for 5s: ...),
// not a longer flag that begins with it nor advice naming the flag.
func flagNamed(msg, name string) bool {
	for rest := msg; ; {
		i := strings.Index(rest, "--"+name+" ")
		if i < 0 {
			return false
		}
		rest = rest[i+3+len(name):]
		if value, _, ok := strings.Cut(rest, " "); strings.HasPrefix(rest, `"`) || ok && strings.HasSuffix(value, ":") || !ok && strings.HasSuffix(rest, ":") {
			return true
		}
	}
}

// addConfigFlag registers --config on the root command.
func addConfigFlag(root *cobra.Command) {
	root.PersistentFlags().String("config", "", "YAML config file holding any of the flags (and pipelines for floe sink); flags and FLOE_* variables override it (default: $"+configEnv+")")
}

// applyConfig fills every flag of cmd that was not given on the command
// line from its FLOE_* environment variable, else from the config file, and
// keeps the parsed file in cmd's context for the pipelines. It returns a
// warning for each variable that overrides another value of the file's:
// a local stack's env.sh sourced before a run with a production --config
// sent its tables to the local catalog without a word (from a new-user
// run).
func applyConfig(cmd *cobra.Command) (warnings []string, err error) {
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		path = os.Getenv(configEnv)
	}
	var file *configFile
	if path != "" {
		var err error
		if file, err = loadConfigFile(path, allFlagNames(cmd.Root())); err != nil {
			return nil, err
		}
		cmd.SetContext(context.WithValue(cmd.Context(), configKey{}, file))
	}
	var errs []error
	src := sourcesOf(cmd.Context())
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "config" || f.Name == "help" {
			return
		}
		env := envName(f.Name)
		// Empty is unset, as for most tools: FLOE_BROKERS= must not be
		// one broker with no name that the sink then waits for.
		if v := os.Getenv(env); v != "" {
			vals := []string{v}
			if _, isSlice := f.Value.(pflag.SliceValue); isSlice {
				vals = strings.Split(v, ",")
			}
			if err := setFlag(cmd.Flags(), f, vals); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w%s", env, err, parseHint(err)))
			} else if src != nil {
				src[f.Name] = env
			}
			if file != nil {
				if fv, ok := file.values[f.Name]; ok && !slices.Equal(fv, vals) && !passwordAdded(fv, vals) {
					// Names only: the values may be secrets.
					warnings = append(warnings, fmt.Sprintf("%s overrides the config file's %s (%s line %d): the environment comes before the file; unset %s to use the file's",
						env, f.Name, file.path, file.lines[f.Name], env))
				}
			}
			return
		}
		if file == nil {
			return
		}
		if vals, ok := file.values[f.Name]; ok {
			if err := setFlag(cmd.Flags(), f, vals); err != nil {
				errs = append(errs, fmt.Errorf("config file %s line %d: %s: %w%s", file.path, file.lines[f.Name], f.Name, err, parseHint(err)))
			} else if src != nil {
				src[f.Name] = fmt.Sprintf("config file %s line %d", file.path, file.lines[f.Name])
			}
		}
	})
	if err := brokersFromKafkaConfig(cmd.Flags(), src); err != nil {
		errs = append(errs, err)
	}
	return warnings, errors.Join(errs...)
}

// brokersFromKafkaConfig sets --brokers from the bootstrap.servers of the
// --kafka-config file where no flag, variable or config-file key gave it:
// the file the other clients read names their brokers too, and ignoring
// it would leave a command without brokers (or an audit without the log)
// for want of a flag the file already answers.
func brokersFromKafkaConfig(fs *pflag.FlagSet, src flagSources) error {
	brokers, config := fs.Lookup("brokers"), fs.Lookup(flagKafkaConfig)
	if brokers == nil || config == nil || brokers.Changed || config.Value.String() == "" {
		return nil
	}
	path := config.Value.String()
	props, err := parseProperties(path)
	if err != nil {
		return err
	}
	p, ok := props["bootstrap.servers"]
	if !ok {
		return nil
	}
	var servers []string
	for s := range strings.SplitSeq(p.value, ",") {
		// The Java client takes a listener's name before the address
		// (SASL_SSL://host:9092); the address is what floe dials.
		if _, addr, ok := strings.Cut(s, "://"); ok {
			s = addr
		}
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	if len(servers) == 0 {
		return nil
	}
	if err := setFlag(fs, brokers, servers); err != nil {
		return fmt.Errorf("--kafka-config %s line %d: bootstrap.servers: %w", path, p.line, err)
	}
	if src != nil {
		src["brokers"] = fmt.Sprintf("--kafka-config %s line %d (bootstrap.servers)", path, p.line)
	}
	return nil
}

// envName is the FLOE_* variable of the flag named name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// misspeltEnv returns a warning for each FLOE_* variable of environ that
// no flag reads but that is a letter or two away from one that does
// (FLOE_BROKER for FLOE_BROKERS): a variable no flag reads is ignored, and
// a misspelt one would leave its setting at the default without a word.
// known holds the flag names of every command, since one environment
// serves them all.
func misspeltEnv(environ []string, known map[string]bool) []string {
	names := []string{configEnv}
	for name := range known {
		names = append(names, envName(name))
	}
	var warnings []string
	for _, kv := range environ {
		env, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(env, envPrefix) || slices.Contains(names, env) {
			continue
		}
		if close := closeTo(env, names); len(close) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s is not a floe variable and is ignored; did you mean %s?", env, strings.Join(close, " or ")))
		}
	}
	slices.Sort(warnings)
	return warnings
}

// setFlag sets f as if given on the command line, so that Changed is true.
func setFlag(fs *pflag.FlagSet, f *pflag.Flag, vals []string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if err := sv.Replace(vals); err != nil {
			return err
		}
		f.Changed = true
		return nil
	}
	if len(vals) != 1 {
		return fmt.Errorf("want one value, got a list of %d", len(vals))
	}
	return fs.Set(f.Name, vals[0])
}

// allFlagNames lists the flag names of every command under root.
func allFlagNames(root *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return names
}

// loadConfigFile parses a config file; known are the valid keys.
func loadConfigFile(path string, known map[string]bool) (*configFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, yamlError(b, err))
	}
	c := &configFile{path: path, values: map[string][]string{}, lines: map[string]int{}}
	if len(doc.Content) == 0 {
		return c, nil // empty file
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: want a mapping of flag names to values at the top", path)
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		key := k.Value
		if key == "pipelines" {
			if err := checkPipelineKeys(v); err != nil {
				return nil, fmt.Errorf("config file %s %w", path, err)
			}
			dec := yaml.NewDecoder(bytes.NewReader(mustMarshal(v)))
			dec.KnownFields(true)
			if err := dec.Decode(&c.pipelines); err != nil {
				return nil, fmt.Errorf("config file %s line %d: pipelines: %w", path, v.Line, err)
			}
			for j, p := range c.pipelines {
				line := v.Line
				if j < len(v.Content) {
					line = v.Content[j].Line
				}
				if p.Topic == "" || p.Table == "" {
					return nil, fmt.Errorf("config file %s: pipelines[%d] (line %d): want both topic: and table:", path, j, line)
				}
				c.pipeLines = append(c.pipeLines, line)
			}
			continue
		}
		if !known[key] || key == "config" || key == "help" {
			if close := closeTo(key, slices.Collect(maps.Keys(known))); len(close) > 0 {
				return nil, fmt.Errorf("config file %s line %d: unknown key %q; did you mean %s?", path, k.Line, key, strings.Join(close, " or "))
			}
			return nil, fmt.Errorf("config file %s line %d: unknown key %q (keys are flag names without dashes, e.g. %s)",
				path, k.Line, key, strings.Join(suggest(key, known), ", "))
		}
		if _, dup := c.values[key]; dup {
			return nil, fmt.Errorf("config file %s line %d: %q given twice", path, k.Line, key)
		}
		if v.Tag == "!!null" && v.Value == "" && len(k.LineComment) > 1 && k.LineComment[1] != ' ' {
			// "password: #x1" is no value and a comment to YAML: the
			// setting would stay unset without a word (found by review).
			// An empty value, or one followed by "# a comment", is unset.
			return nil, fmt.Errorf("config file %s line %d: %s: the value starts with '#', which YAML reads as a comment: quote it ('#...')", path, v.Line, key)
		}
		vals, err := nodeValues(v)
		if err != nil {
			return nil, fmt.Errorf("config file %s line %d: %s: %w", path, v.Line, key, err)
		}
		c.values[key] = vals
		c.lines[key] = v.Line
	}
	return c, nil
}

// yamlError is err, yaml's error parsing config file b, without what it
// quotes of an alias: an unquoted value starting with '*' (a password) is
// one to YAML, and its error named it. It says the line and the fix.
func yamlError(b []byte, err error) error {
	if !strings.Contains(err.Error(), "unknown anchor") {
		return err
	}
	for i, line := range strings.Split(string(b), "\n") {
		if _, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(strings.TrimSpace(v), "*") {
			return fmt.Errorf("line %d: the value starts with '*', which YAML reads as an alias: quote it ('*...')", i+1)
		}
	}
	return errors.New("a value starts with '*', which YAML reads as an alias: quote it ('*...')")
}

// nodeValues turns a YAML value into flag values: a scalar is one value, a
// sequence of scalars a list, a mapping a list of KEY=VALUE (for
// catalog-prop).
func nodeValues(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if err := checkTag(n); err != nil {
			return nil, err
		}
		return []string{n.Value}, nil
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, errors.New("want a list of plain values")
			}
			if err := checkTag(e); err != nil {
				return nil, err
			}
			out = append(out, e.Value)
		}
		return out, nil
	case yaml.MappingNode:
		var out []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i+1].Kind != yaml.ScalarNode {
				return nil, errors.New("want a mapping of plain values")
			}
			if err := checkTag(n.Content[i+1]); err != nil {
				return nil, fmt.Errorf("%s: %w", n.Content[i].Value, err)
			}
			out = append(out, n.Content[i].Value+"="+n.Content[i+1].Value)
		}
		return out, nil
	}
	return nil, errors.New("want a value, a list or a mapping")
}

// checkTag refuses a scalar that YAML reads as something other than what
// it shows, a password most often: a value starting with '!' is a tag, the
// value after it what is left; with '&' an anchor, likewise (found by
// review).
func checkTag(n *yaml.Node) error {
	switch {
	case strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!"):
		return errors.New("the value starts with '!', which YAML reads as a tag: quote it ('!...')")
	case n.Anchor != "":
		return errors.New("the value starts with '&', which YAML reads as an anchor: quote it ('&...')")
	}
	return nil
}

func mustMarshal(n *yaml.Node) []byte {
	b, err := yaml.Marshal(n)
	if err != nil {
		panic(err) // a node parsed from YAML always marshals
	}
	return b
}

// checkDuplicatePipelines refuses two pipelines of the config file that
// sink the same partitions of one topic into one table: they ran, and
// fenced each other at every commit for as long as the sink ran (found by
// a new user). Pipelines of one topic and table with disjoint partitions:
// keys share it as separate processes would.
func (c *configFile) checkDuplicatePipelines() error {
	for j, p := range c.pipelines {
		for i, q := range c.pipelines[:j] {
			if p.Topic != q.Topic || p.Table != q.Table {
				continue
			}
			shared := "every partition"
			if len(p.Partitions) > 0 || len(q.Partitions) > 0 {
				var both []string
				for _, n := range p.Partitions {
					if len(q.Partitions) == 0 || slices.Contains(q.Partitions, n) {
						both = append(both, strconv.Itoa(int(n)))
					}
				}
				if len(p.Partitions) == 0 {
					for _, n := range q.Partitions {
						both = append(both, strconv.Itoa(int(n)))
					}
				}
				if len(both) == 0 {
					continue
				}
				shared = "partitions " + strings.Join(both, ",")
			}
			return fmt.Errorf("config file %s: pipelines[%d] (line %d) and pipelines[%d] (line %d) both sink %s of topic %s into %s, and would fence each other at every commit: remove one of them (or give each a partitions: key of its own, disjoint ones)",
				c.path, i, c.pipeLines[i], j, c.pipeLines[j], shared, p.Topic, p.Table)
		}
	}
	return nil
}

// sets reports whether the pipeline gives key (one of pipelineKeys).
func (p pipeline) sets(key string) bool {
	switch key {
	case "envelope":
		return p.Envelope != ""
	case "id-columns":
		return p.IDColumns != nil
	case "key":
		return p.Key != ""
	case "mode":
		return p.Mode != ""
	case "partition-by":
		return p.PartitionBy != ""
	case "partitions":
		return p.Partitions != nil
	case "table":
		return p.Table != ""
	case "topic":
		return p.Topic != ""
	case "value":
		return p.Value != ""
	}
	return false
}

// filePipelineError is an error about pipeline index of config file
// path, at line. Its message names the file, the pipeline and, for keys
// (those the pipeline sets, and those no flag set for every pipeline),
// the file's keys where the errors under it name flags: `value: json`,
// not `--value json` (withFlags, fileTerms).
type filePipelineError struct {
	path        string
	index, line int
	pipeline    pipeline
	keys        []string
	err         error
}

func (e *filePipelineError) prefix() string {
	return fmt.Sprintf("config file %s: pipelines[%d] (line %d, %s -> %s): ", e.path, e.index, e.line, e.pipeline.Topic, e.pipeline.Table)
}

func (e *filePipelineError) Error() string { return e.prefix() + e.err.Error() }

func (e *filePipelineError) Unwrap() error { return e.err }

// fileTerms says msg, about a config file's pipeline, in the file's
// terms: each flag of keys becomes the key ("--value json" becomes
// "value: json"), and "pass --value json" becomes "set value: json". A
// command the message suggests keeps its flags (floe drop --table T).
func fileTerms(msg string, keys []string) string {
	var b strings.Builder
	command := false // in a floe command, up to the end of its clause
	for i := 0; i < len(msg); {
		if strings.HasPrefix(msg[i:], "floe ") && (i == 0 || msg[i-1] == ' ') {
			command = true
		} else if strings.ContainsRune(";,()", rune(msg[i])) {
			command = false
		}
		key, ok := flagAt(msg[i:], keys)
		if !ok || command {
			b.WriteByte(msg[i])
			i++
			continue
		}
		if strings.HasSuffix(b.String(), "pass ") {
			s := b.String()
			b.Reset()
			b.WriteString(strings.TrimSuffix(s, "pass ") + "set ")
		}
		b.WriteString(key + ":")
		i += len("--") + len(key)
	}
	return b.String()
}

// flagAt returns the key whose flag msg begins with, as a whole word.
func flagAt(msg string, keys []string) (string, bool) {
	rest, ok := strings.CutPrefix(msg, "--")
	if !ok {
		return "", false
	}
	for _, key := range keys {
		after, ok := strings.CutPrefix(rest, key)
		if ok && (after == "" || !strings.ContainsAny(after[:1], "abcdefghijklmnopqrstuvwxyz0123456789-")) {
			return key, true
		}
	}
	return "", false
}

// pipelineKeys are the keys of a pipeline in a config file (pipeline's
// yaml tags).
var pipelineKeys = []string{"envelope", "id-columns", "key", "mode", "partition-by", "partitions", "table", "topic", "value"}

// checkPipelineKeys refuses a key of a pipeline that is not one, naming
// its line in the file (the decoder's own error counts lines from the
// pipelines list and names Go types).
func checkPipelineKeys(pipelines *yaml.Node) error {
	for _, p := range pipelines.Content {
		if p.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i < len(p.Content); i += 2 {
			k := p.Content[i]
			if slices.Contains(pipelineKeys, k.Value) {
				continue
			}
			hint := "a pipeline's keys are " + strings.Join(pipelineKeys, ", ")
			if close := closeTo(k.Value, pipelineKeys); len(close) > 0 {
				hint = "did you mean " + strings.Join(close, " or ") + "? (" + hint + ")"
			}
			return fmt.Errorf("line %d: pipelines: unknown key %q; %s", k.Line, k.Value, hint)
		}
	}
	return nil
}

// closeTo returns the names within two edits of word (a misspelling),
// sorted.
func closeTo(word string, names []string) []string {
	var out []string
	for _, n := range names {
		if n != word && (levenshtein.ComputeDistance(word, n) <= 2 || strings.EqualFold(word, n)) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// suggest returns up to three known keys that share a word with key.
func suggest(key string, known map[string]bool) []string {
	var out []string
	for _, part := range strings.Split(key, "-") {
		for k := range known {
			if strings.Contains(k, part) && !slices.Contains(out, k) && len(out) < 3 {
				out = append(out, k)
			}
		}
	}
	if len(out) == 0 {
		out = []string{"brokers", "catalog", "warehouse"}
	}
	slices.Sort(out)
	return out
}

// passwordAdded reports whether env is the URI file gives with a password
// added: the documented way to keep a catalog's password out of the file
// (catalog: postgres://floe@host/db, FLOE_CATALOG with floe:PASSWORD@),
// which overrides nothing the file meant.
func passwordAdded(file, env []string) bool {
	if len(file) != 1 || len(env) != 1 {
		return false
	}
	fu, err := url.Parse(file[0])
	if err != nil || fu.User == nil {
		return false
	}
	eu, err := url.Parse(env[0])
	if err != nil || eu.User == nil {
		return false
	}
	if _, ok := fu.User.Password(); ok {
		return false
	}
	if _, ok := eu.User.Password(); !ok || eu.User.Username() != fu.User.Username() {
		return false
	}
	eu.User = url.User(eu.User.Username())
	return eu.String() == fu.String()
}
