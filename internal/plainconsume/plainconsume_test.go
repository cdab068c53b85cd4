package plainconsume

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestFetchSizesAreTheSinks: the baseline fetches as floe sink does. Its
// fetch sizes are repeated here (this package links franz-go only), so
// this reads the sink's from connector/session.go: a baseline at other
// sizes measured its fetches, not the sink (on 1,000 partitions, with
// franz-go's defaults, it read slower than the sink).
func TestFetchSizesAreTheSinks(t *testing.T) {
	sink := constValues(t, "../../connector/session.go")
	for name, want := range map[string]int64{"fetchMaxBytes": fetchMaxBytes, "fetchMaxPartitionBytes": fetchMaxPartitionBytes} {
		got, ok := sink[name]
		if !ok {
			t.Fatalf("connector/session.go declares no %s: where does the sink set its fetch sizes now?", name)
		}
		if got != want {
			t.Errorf("%s: the sink's is %d, the baseline's %d: give internal/plainconsume the sink's", name, got, want)
		}
	}
}

// constValues evaluates the integer constants of a Go file built of
// literals, <<, / and earlier constants of the file.
func constValues(t *testing.T, path string) map[string]int64 {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]int64{}
	var eval func(ast.Expr) (int64, bool)
	eval = func(e ast.Expr) (int64, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			var n int64
			for _, c := range e.Value {
				if c < '0' || c > '9' {
					return 0, false
				}
				n = n*10 + int64(c-'0')
			}
			return n, e.Kind == token.INT
		case *ast.Ident:
			n, ok := vals[e.Name]
			return n, ok
		case *ast.ParenExpr:
			return eval(e.X)
		case *ast.BinaryExpr:
			x, okx := eval(e.X)
			y, oky := eval(e.Y)
			if !okx || !oky {
				return 0, false
			}
			switch e.Op {
			case token.SHL:
				return x << y, true
			case token.QUO:
				return x / y, true
			case token.MUL:
				return x * y, true
			}
		}
		return 0, false
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			for i, name := range v.Names {
				if i < len(v.Values) {
					if n, ok := eval(v.Values[i]); ok {
						vals[name.Name] = n
					}
				}
			}
		}
	}
	return vals
}
