// Package transform runs connector response transformations in a JavaScript
// sandbox (goja).
//
// A transformation is the BODY of a function that sees `data` (the parsed
// upstream response) and `response` ({status, headers}) and returns the
// result. Compile wraps it as
//
//	(function(data, response) {
//	<script>
//	})
//
// so that evaluating the compiled program yields that function. Positions
// reported by Compile are relative to the user's script; positions reported
// by the runtime (stack traces, thrown errors) are LineOffset lines below it.
package transform

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/parser"
)

// LineOffset is how many lines the wrapper adds before the user's script:
// subtract it from a line of the compiled program to get the script's line.
const LineOffset = 1

const (
	wrapperHead = "(function(data, response) {\n"
	wrapperTail = "\n})"
)

// CompileError is a transformation that does not compile. Line and Column
// (1-based, Column counted in characters) are positions in the user's
// script, not in the wrapper; Message never contains the script itself.
type CompileError struct {
	Line    int
	Column  int
	Message string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Message)
}

// Compile compiles script, the body of a function of (data, response), into
// a program whose evaluation yields that function. name labels the program
// in stack traces (e.g. "weather.forecast").
//
// The function is compiled in strict mode, so that assigning an undeclared
// variable throws instead of leaking a global into a pooled runtime. A
// script that closes the wrapper early to run code outside the function
// (`}); doSomething(); (function(){`) is refused. Failures are
// *CompileError.
func Compile(name, script string) (*goja.Program, error) {
	if !utf8.ValidString(script) {
		line, col := invalidUTF8Position(script)
		return nil, &CompileError{Line: line, Column: col, Message: "the script is not valid UTF-8"}
	}
	src := wrapperHead + script + wrapperTail
	// Source maps are disabled: a `//# sourceMappingURL=` comment must not
	// make the parser load anything.
	prog, err := parser.ParseFile(nil, name, src, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, parseError(script, err)
	}
	if err := checkWrapper(script, prog); err != nil {
		return nil, err
	}
	p, err := goja.CompileAST(prog, true)
	if err != nil {
		return nil, compileError(script, err)
	}
	return p, nil
}

// checkWrapper verifies that the program is still exactly the one function
// expression of the wrapper.
func checkWrapper(script string, prog *ast.Program) error {
	if len(prog.Body) == 1 {
		if st, ok := prog.Body[0].(*ast.ExpressionStatement); ok {
			if fn, ok := st.Expression.(*ast.FunctionLiteral); ok && int(fn.Body.RightBrace)-1 == len(wrapperHead)+len(script)+1 {
				return nil
			}
		}
	}
	// Point at the brace that closed the function early, when there is one.
	line, col := 1, 1
	if len(prog.Body) > 0 {
		if st, ok := prog.Body[0].(*ast.ExpressionStatement); ok {
			if fn := firstFunction(st.Expression); fn != nil {
				pos := prog.File.Position(int(fn.Body.RightBrace) - 1)
				line, col = scriptPosition(script, pos.Line, pos.Column)
			}
		}
	}
	return &CompileError{Line: line, Column: col, Message: "the script closes the function body early; a transformation is the body of a function (statements ending in `return ...`), not a complete program"}
}

// firstFunction finds the wrapper function at the start of expression e.
func firstFunction(e ast.Expression) *ast.FunctionLiteral {
	for {
		switch x := e.(type) {
		case *ast.FunctionLiteral:
			return x
		case *ast.SequenceExpression:
			if len(x.Sequence) == 0 {
				return nil
			}
			e = x.Sequence[0]
		case *ast.BinaryExpression:
			e = x.Left
		case *ast.CallExpression:
			e = x.Callee
		case *ast.DotExpression:
			e = x.Left
		case *ast.BracketExpression:
			e = x.Left
		case *ast.ConditionalExpression:
			e = x.Test
		case *ast.AssignExpression:
			e = x.Left
		default:
			return nil
		}
	}
}

func parseError(script string, err error) error {
	var list parser.ErrorList
	if errors.As(err, &list) && len(list) > 0 {
		return positioned(script, list[0].Position, list[0].Message)
	}
	var one *parser.Error
	if errors.As(err, &one) {
		return positioned(script, one.Position, one.Message)
	}
	return &CompileError{Line: 1, Column: 1, Message: err.Error()}
}

func compileError(script string, err error) error {
	var syn *goja.CompilerSyntaxError
	if errors.As(err, &syn) {
		return compilerError(script, "SyntaxError", syn.CompilerError)
	}
	var ref *goja.CompilerReferenceError
	if errors.As(err, &ref) {
		return compilerError(script, "ReferenceError", ref.CompilerError)
	}
	return &CompileError{Line: 1, Column: 1, Message: err.Error()}
}

func compilerError(script, kind string, e goja.CompilerError) error {
	if e.File == nil {
		return &CompileError{Line: 1, Column: 1, Message: kind + ": " + e.Message}
	}
	return positioned(script, e.File.Position(e.Offset), kind+": "+e.Message)
}

func positioned(script string, pos file.Position, msg string) error {
	line, col := scriptPosition(script, pos.Line, pos.Column)
	return &CompileError{Line: line, Column: col, Message: msg}
}

// scriptPosition maps a position in the wrapped source (1-based line, byte
// column) to the user's script (1-based line, character column). Positions
// in the wrapper's head map to the script's start; positions in its tail
// (an unclosed block reported at the end of input) to the script's end.
func scriptPosition(script string, line, byteCol int) (int, int) {
	lines := strings.Split(script, "\n")
	line -= LineOffset
	switch {
	case line < 1:
		return 1, 1
	case line > len(lines):
		last := lines[len(lines)-1]
		return len(lines), utf8.RuneCountInString(last) + 1
	}
	text := lines[line-1]
	byteCol = min(max(byteCol, 1), len(text)+1)
	return line, utf8.RuneCountInString(text[:byteCol-1]) + 1
}

// invalidUTF8Position finds the first invalid byte of s.
func invalidUTF8Position(s string) (int, int) {
	line, col := 1, 1
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return line, col
			}
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
