package mapping

import (
	"strings"
	"testing"
)

// TestCheckJSONText: text encoding/json would take and silently change
// (bytes not UTF-8, half a surrogate pair) is refused; an escaped
// backslash before "ud800" and a whole pair are not.
func TestCheckJSONText(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"s":"plain"}`, true},
		{`{"s":"\ud83d\ude00"}`, true},
		{`{"s":"\\ud800"}`, true},
		{`{"s":"\u00e9\n"}`, true},
		{`{"s":"\ud800"}`, false},
		{`{"s":"\ud800x"}`, false},
		{`{"s":"\udc00"}`, false},
		{`{"s":"\ud800\u0041"}`, false},
		{"{\"s\":\"a\xffb\"}", false},
	} {
		if err := checkJSONText([]byte(c.in)); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.in, err, c.ok)
		}
	}
}

// TestJSONOfRegistryFramedRecord (from a new-user run): Confluent-framed
// Avro sunk with --key json was refused as "not UTF-8 text at byte 5",
// which did not say that the records are in the schema-registry wire
// format and want registry.
func TestJSONOfRegistryFramedRecord(t *testing.T) {
	for _, framed := range [][]byte{
		append([]byte{0, 0, 0, 0, 7}, 0xd2, 0x0f, 0x06, 'a', 'b', 'c'), // Avro
		append([]byte{0, 0, 0, 0, 7}, `{"id":1}`...),                   // JSON Schema
	} {
		_, err := parseJSON(framed)
		if err == nil || !strings.Contains(err.Error(), "schema-registry wire format (schema ID 7") || !strings.Contains(err.Error(), "--key registry") {
			t.Errorf("%q: %v; want the wire format and registry named", framed, err)
		}
	}
	if _, err := parseJSON([]byte{0, 1}); err == nil || strings.Contains(err.Error(), "wire format") {
		t.Errorf("two bytes: %v; want a plain refusal (too short for a frame)", err)
	}
}
