package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
)

// expressionKeys are the struct fields upstream test tables keep their CEL text in.
var expressionKeys = map[string]bool{"expr": true, "expression": true, "Expr": true, "Expression": true}

// listKeys are the fields apiextensions' validation tables keep lists of rules in: `valid`
// ([]string of rules that hold) and `errors` (map from rule to expected error).
var listKeys = map[string]bool{"valid": true, "errors": true}

type extracted struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Expr string `json:"expr"`
}

// extract prints every CEL expression literal of the given Go test files: the value of an
// `expr:` / `expression:` field written as a string literal (or a sum of literals).
func extract(files []string) {
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	for _, file := range files {
		fset := token.NewFileSet()
		parsed, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			continue
		}
		ast.Inspect(parsed, func(node ast.Node) bool {
			pair, ok := node.(*ast.KeyValueExpr)
			if !ok {
				return true
			}
			key, ok := pair.Key.(*ast.Ident)
			if !ok {
				return true
			}
			if listKeys[key.Name] {
				for _, item := range listItems(pair.Value) {
					if text, ok := literal(item); ok {
						line := fset.Position(item.Pos()).Line
						_ = encoder.Encode(extracted{File: file, Line: line, Expr: text})
					}
				}
				return true
			}
			if !expressionKeys[key.Name] {
				return true
			}
			if text, ok := literal(pair.Value); ok {
				line := fset.Position(pair.Pos()).Line
				_ = encoder.Encode(extracted{File: file, Line: line, Expr: text})
			}
			return true
		})
	}
}

// listItems are a composite literal's elements, or a map literal's keys.
func listItems(node ast.Expr) []ast.Expr {
	composite, ok := node.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	items := make([]ast.Expr, 0, len(composite.Elts))
	for _, element := range composite.Elts {
		if pair, ok := element.(*ast.KeyValueExpr); ok {
			element = pair.Key
		}
		items = append(items, element)
	}
	return items
}

func literal(node ast.Expr) (string, bool) {
	switch n := node.(type) {
	case *ast.BasicLit:
		if n.Kind != token.STRING {
			return "", false
		}
		text, err := strconv.Unquote(n.Value)
		return text, err == nil
	case *ast.ParenExpr:
		return literal(n.X)
	case *ast.BinaryExpr:
		if n.Op != token.ADD {
			return "", false
		}
		left, ok := literal(n.X)
		if !ok {
			return "", false
		}
		right, ok := literal(n.Y)
		return left + right, ok
	}
	return "", false
}
