// Command switchboard is the Switchboard control plane and, when started by
// Terraform, the terraform-provider-switchboard plugin.
//
//	switchboard serve              run the control plane
//	switchboard version            print the version
//	switchboard migrate            apply pending schema migrations and exit
//	switchboard rotate-master-key  re-encrypt every secret under a new master key
//	switchboard store copy         copy a bbolt database into PostgreSQL
//	switchboard openapi import     print a connector and actions from an OpenAPI description
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/switchboard-dev/terraform-provider-switchboard/provider"
	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/config"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/gcfloor"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/logbuf"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

const usage = `usage: switchboard <command> [flags]

commands:
  serve              run the control plane
  version            print the version
  migrate            apply pending schema migrations and exit
  rotate-master-key  re-encrypt every secret under a new master key (server stopped)
  store copy         copy a bbolt database into PostgreSQL (switchboard store -h)
  openapi import     print a connector and actions from an OpenAPI description (switchboard openapi -h)

switchboard <command> -h lists the command's flags. Started by Terraform (TF_PLUGIN_MAGIC_COOKIE set) it serves the Terraform provider.
`

// commands describes the commands that take the configuration flags.
var commands = map[string]string{
	"serve":             "Run the control plane.",
	"migrate":           "Apply pending schema migrations and exit.",
	"rotate-master-key": "Re-encrypt every stored secret under a new master key (from SWITCHBOARD_NEW_MASTER_KEY, else generated). Stop the server first.",
}

func main() {
	if os.Getenv("TF_PLUGIN_MAGIC_COOKIE") != "" || len(os.Args) > 1 && os.Args[1] == "-debug" {
		os.Exit(serveProvider(os.Args[1:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "switchboard", version)
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "store":
		return runStore(ctx, rest, stdout, stderr)
	case "openapi":
		return runOpenAPI(ctx, rest, os.Stdin, stdout, stderr)
	}
	if _, ok := commands[cmd]; !ok {
		fmt.Fprintf(stderr, "switchboard: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.Load(rest, os.Getenv)
	var fe *config.FlagError
	if errors.As(err, &fe) && errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "usage: switchboard %s [flags]\n\n%s\n\nflags (each also set by the environment variable named, or the config file):\n%s", cmd, commands[cmd], fe.Usage)
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "switchboard:", err)
		return 2
	}
	log, logOut := newLogger(stderr, cfg.LogLevel)
	defer logOut.Close()
	slog.SetDefault(log)
	switch cmd {
	case "serve":
		tuneGC(ctx, os.Getenv)
		err = server.Run(ctx, cfg, log, stdout)
	case "migrate":
		var st store.Store
		if st, err = server.OpenStore(ctx, cfg, log); err == nil {
			fmt.Fprintf(stdout, "schema version %d\n", store.SchemaVersion())
			err = st.Close()
		}
	case "rotate-master-key":
		err = server.RotateMasterKey(ctx, cfg, os.Getenv("SWITCHBOARD_NEW_MASTER_KEY"), log, stdout)
	}
	if err != nil {
		log.Error(cmd+" failed", "error", err.Error())
		fmt.Fprintln(stderr, "switchboard:", err)
		return 1
	}
	return 0
}

// tuneGC paces the garbage collector for serving (see server/gcfloor)
// until ctx ends, unless the GOGC environment variable is set.
func tuneGC(ctx context.Context, getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	go gcfloor.Run(ctx, 0, 0)
	return true
}

// newLogger logs JSON lines to w through a batching writer (a request
// costs no write system call); warnings and errors are written at once.
// Close the writer to write out what remains.
func newLogger(w io.Writer, level string) (*slog.Logger, *logbuf.Writer) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	out := logbuf.New(w, logbuf.DefaultInterval)
	return slog.New(logbuf.FlushAt(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: l}), out, slog.LevelWarn)), out
}

func serveProvider(args []string) int {
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	debug := fs.Bool("debug", false, "run the provider with support for debuggers like delve")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: "registry.terraform.io/switchboard-dev/switchboard",
		Debug:   *debug,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
