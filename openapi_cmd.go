package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/switchboard-dev/terraform-provider-switchboard/server/errs"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/openapiimport"
)

const openapiUsage = `usage: switchboard openapi import SPEC --connector NAME [--tag T]... [--operation ID]... [--base-url URL] [--format hcl|json]

Maps an OpenAPI 3.0/3.1 or Swagger 2.0 description (a JSON or YAML file, or -
for standard input) to a Switchboard connector and one action per operation,
and prints Terraform configuration (a switchboard_connector and one
switchboard_action per operation) or, with --format json, the definitions as
the API takes them: {connector, actions, skipped}. Operations that cannot be
mapped are listed with the reason (as comments at the top of the Terraform
configuration) and counted on standard error. Nothing is sent to a server.

flags:
`

// stringList is a flag that may be given several times.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runOpenAPI runs "switchboard openapi <subcommand>".
func runOpenAPI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("openapi import", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	connector := fs.String("connector", "", "the connector's name (required): a lower-case letter, then up to 63 lower-case letters, digits or underscores")
	var tags, ops stringList
	fs.Var(&tags, "tag", "import the operations with this tag (repeatable; with --operation, either matches)")
	fs.Var(&ops, "operation", "import this operation, by operationId or action name (repeatable)")
	baseURL := fs.String("base-url", "", "the connector's baseUrl instead of the description's first server URL")
	format := fs.String("format", "hcl", "output: hcl (Terraform configuration) or json")
	help := func(w io.Writer) {
		fmt.Fprint(w, openapiUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "import" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			help(stdout)
			return 0
		}
		help(stderr)
		return 2
	}
	// Flags may come before or after SPEC.
	var positional []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				help(stdout)
				return 0
			}
			fmt.Fprintf(stderr, "switchboard openapi import: %v\n\n", err)
			help(stderr)
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch {
	case len(positional) != 1:
		fmt.Fprintf(stderr, "switchboard openapi import: want one SPEC (a file, or - for standard input), got %d\n\n", len(positional))
		help(stderr)
		return 2
	case *connector == "":
		fmt.Fprintln(stderr, "switchboard openapi import: --connector NAME is required")
		return 2
	case *format != "hcl" && *format != "json":
		fmt.Fprintf(stderr, "switchboard openapi import: --format %q: want hcl or json\n", *format)
		return 2
	}
	var (
		data []byte
		err  error
	)
	if positional[0] == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(positional[0])
	}
	if err != nil {
		fmt.Fprintln(stderr, "switchboard openapi import:", err)
		return 1
	}
	res, err := openapiimport.Import(ctx, data, openapiimport.Options{
		Connector: *connector, Tags: tags, Operations: ops, BaseURL: *baseURL,
	})
	if err != nil {
		fmt.Fprintln(stderr, "switchboard openapi import:", err)
		for _, p := range errs.ProblemsOf(err) {
			fmt.Fprintf(stderr, "  %s: %s\n", p.Field, p.Problem)
		}
		return 1
	}
	if *format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		_, err = stdout.Write(openapiimport.HCL(res))
	}
	if err != nil {
		fmt.Fprintln(stderr, "switchboard openapi import:", err)
		return 1
	}
	fmt.Fprintf(stderr, "switchboard openapi import: connector %s: %d actions, %d operations skipped\n", *connector, len(res.Actions), len(res.Skipped))
	return 0
}
