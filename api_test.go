package hedge_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite testdata/api.txt with the package's exported API")

// TestAPI keeps the package's exported API in testdata/api.txt: every
// exported constant, variable, function, type, method and struct field.
// A change to the API must change that file too (go test -run TestAPI
// -update-api), so that it is seen in review. The tools behind cmd/hedge
// reach what they need through the module's internal packages, not here.
func TestAPI(t *testing.T) {
	got := exportedAPI(t, ".")
	if *updateAPI {
		if err := os.WriteFile("testdata/api.txt", []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile("testdata/api.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for _, s := range got {
		if !slices.Contains(want, s) {
			t.Errorf("new in the API: %s", s)
		}
	}
	for _, s := range want {
		if !slices.Contains(got, s) {
			t.Errorf("gone from the API: %s", s)
		}
	}
	if t.Failed() {
		t.Log("if the change is meant, run go test -run TestAPI -update-api")
	}
}

// exportedAPI lists the exported declarations of the package in dir,
// its tests left out, one a line and sorted.
func exportedAPI(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					out = append(out, "func "+d.Name.Name)
					continue
				}
				recv := typeName(d.Recv.List[0].Type)
				if ast.IsExported(strings.TrimPrefix(recv, "*")) {
					out = append(out, "method ("+recv+") "+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, d.Tok.String()+" "+n.Name)
							}
						}
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						out = append(out, "type "+s.Name.Name)
						var fields *ast.FieldList
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields = ty.Fields
						case *ast.InterfaceType:
							fields = ty.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								if n.IsExported() {
									out = append(out, "field "+s.Name.Name+"."+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// typeName names a receiver's type, without type parameters.
func typeName(x ast.Expr) string {
	switch x := x.(type) {
	case *ast.StarExpr:
		return "*" + typeName(x.X)
	case *ast.IndexExpr:
		return typeName(x.X)
	case *ast.IndexListExpr:
		return typeName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
