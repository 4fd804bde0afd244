package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/switchboard-dev/terraform-provider-switchboard/server"
	"github.com/switchboard-dev/terraform-provider-switchboard/server/store"
)

const storeUsage = `usage: switchboard store copy --from <bbolt file> --to <postgres://… | bbolt file> [--merge]

Copies every bucket and sequence of a bbolt database into another store,
in pages of bounded size. Secrets are copied still sealed: the target needs
the same master key (SWITCHBOARD_MASTER_KEY or master.key).

Stop every server using the source first. A target that already holds data
is refused unless --merge is given; with --merge the source's keys overwrite
the target's, other keys are kept and sequences are raised to the larger.
A copy that stopped halfway is finished by running it again with --merge;
running it again is harmless.

flags:
`

// runStore runs "switchboard store <subcommand>".
func runStore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("store copy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	from := fs.String("from", filepath.Join(".", "data", server.DBFile), "the bbolt database to copy")
	to := fs.String("to", os.Getenv("SWITCHBOARD_DATABASE_URL"), "the target: a PostgreSQL URL (default $SWITCHBOARD_DATABASE_URL) or a bbolt file path")
	merge := fs.Bool("merge", false, "copy into a target that holds data: overwrite the source's keys, keep the others")
	help := func(w io.Writer) {
		fmt.Fprint(w, storeUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "copy" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
			help(stdout)
			return 0
		}
		help(stderr)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "switchboard store copy: %v\n\n", err)
		help(stderr)
		return 2
	}
	if *to == "" {
		fmt.Fprintln(stderr, "switchboard store copy: no target: pass --to postgres://user@host/db or set SWITCHBOARD_DATABASE_URL")
		return 2
	}
	if err := copyStore(ctx, *from, *to, *merge, stdout); err != nil {
		fmt.Fprintln(stderr, "switchboard store copy:", err)
		return 1
	}
	return 0
}

// copyStore copies the bbolt database at from into the store named by to
// and prints what it copied per bucket.
func copyStore(ctx context.Context, from, to string, merge bool, out io.Writer) error {
	if _, err := os.Stat(from); err != nil {
		return fmt.Errorf("source %s: %w (pass --from with the path of switchboard.db)", from, err)
	}
	if !isPostgresURL(to) && sameFile(from, to) {
		return fmt.Errorf("--from and --to both name %s", from)
	}
	src, err := store.OpenBolt(from)
	if errors.Is(err, store.ErrInUse) {
		return fmt.Errorf("source: %w: stop the switchboard serving it first", err)
	}
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	defer src.Close()
	dst, err := openCopyTarget(ctx, to)
	if err != nil {
		return fmt.Errorf("target %s: %w", redactURL(to), err)
	}
	defer dst.Close()
	fmt.Fprintf(out, "copying %s to %s\n", from, redactURL(to))
	stats, err := store.Copy(ctx, dst, src, store.CopyOptions{Merge: merge})
	if len(stats.Buckets) > 0 {
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "bucket\tkeys\treplaced\tsequence")
		for _, b := range stats.Buckets {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", b.Bucket, b.Keys, b.Replaced, b.Sequence)
		}
		tw.Flush()
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "copied %d keys\n", stats.Keys())
	return nil
}

// openCopyTarget opens the copy's target: a PostgreSQL URL, or else a
// bbolt file path.
func openCopyTarget(ctx context.Context, to string) (store.Store, error) {
	if isPostgresURL(to) {
		return store.OpenPostgres(ctx, to, store.PostgresOptions{})
	}
	return store.OpenBolt(to)
}

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// sameFile reports whether paths a and b name one existing file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// redactURL is a database URL or path fit for output: a URL's password
// (in the user part or a password parameter) is replaced by "xxxxx".
func redactURL(s string) string {
	if !isPostgresURL(s) {
		return s
	}
	return store.RedactURL(s)
}
