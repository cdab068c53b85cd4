package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigPipelineErrorsNameFileKeys (from a user's run): an error
// about one pipeline of a config file named the command-line flags
// ("--value \"xml\": want ...", "pass --value json to write into it"),
// which the user had not given, and often not the pipeline. Every such
// refusal names the file, the pipeline (index, line, topic and table) and
// the file's keys, with the fix in the file's terms; a command it
// suggests keeps its flags.
func TestConfigPipelineErrorsNameFileKeys(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.json", "--value", "json", "--stop-at-end"}, loc...)...)
	for _, c := range []struct{ table, keys, want string }{
		{"lake.new", "value: xml", `value: "xml": want raw, json or registry`},
		{"lake.new", "key: avro", `key: "avro": want raw, string, json or registry`},
		{"lake.new", "envelope: cdc", `envelope: "cdc": want none or debezium`},
		{"lake.new", "envelope: debezium\n    value: json", "envelope: debezium needs value: and key:, each json"},
		{"lake.new", "envelope: debezium\n    value: raw\n    key: json", `value: "raw": want json or registry with envelope: debezium`},
		{"lake.new", "value: registry", "the schema registry that decodes value: registry or key: registry"},
		{"lake.new", "mode: bogus", `mode: "bogus": want append or upsert`},
		{"lake.new", "mode: append\n    id-columns: [a]", "id-columns: a keys an upsert table, not mode: append: use mode: upsert"},
		{"lake.new", "id-columns: [a]", "id-columns: a keys an upsert table: add mode: upsert"},
		{"lake.new", "mode: upsert\n    id-columns: [a]", "(no value:): decode them (value: json or registry)"},
		{"lake.new", "envelope: debezium\n    value: json\n    key: json\n    mode: append", "envelope: debezium makes an upsert table, not mode: append: leave mode: out"},
		{"lake.new", "envelope: debezium\n    value: json\n    key: json\n    id-columns: [a]", "leave id-columns: a out"},
		{"lake.new", "partition-by: 'hour(x'", `partition-by: "hour(x": a ( is not closed`},
		{"lake.new", "value: json\n    mode: upsert\n    partition-by: 'hour(kafka_timestamp)'", "or leave partition-by: out"},
		{"lake.new", "partitions: [7]", `partitions: "7": want partitions of topic orders, which has 3`},
		{"lake.json", "value: raw", "table lake.json keeps its values as json, not raw (a table keeps the layout it was created with: set value: json to write into it"},
		{"lake.json", "mode: upsert", "a table keeps the mode it was created with; write into a new table, or run with mode: append"},
		{"lake.json", "envelope: debezium\n    value: json\n    key: json", "sink the debezium records into a new table, table: NEW, or floe drop --table lake.json --yes removes it"},
	} {
		conf := filepath.Join(t.TempDir(), "floe.yaml")
		writeFile(t, conf, fmt.Sprintf("brokers: [%s]\nstop-at-end: true\npipelines:\n  - topic: orders\n    table: lake.other\n  - topic: orders\n    table: %s\n    %s\n",
			st.Brokers[0], c.table, c.keys))
		code, _, errs := floe(t, append([]string{"sink", "--config", conf}, loc...)...)
		line := errorLine(errs)
		prefix := fmt.Sprintf("floe: config file %s: pipelines[1] (line 6, orders -> %s): ", conf, c.table)
		rest, named := strings.CutPrefix(line, prefix)
		if code != exitError || !named || !strings.Contains(rest, c.want) {
			t.Errorf("pipeline with %q: exit %d, error line\n%s\nwant exit %d, a line starting %q holding %q", c.keys, code, line, exitError, prefix, c.want)
			continue
		}
		for _, flag := range []string{"--value", "--key", "--envelope", "--mode", "--id-columns", "--partition-by", "--partitions"} {
			if strings.Contains(rest, flag) {
				t.Errorf("pipeline with %q: the error names the flag %s, not the file's key:\n%s", c.keys, flag, line)
			}
		}
	}
}
