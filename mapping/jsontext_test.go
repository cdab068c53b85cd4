package mapping

import "testing"

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
