package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of the command line (docs/cli.md). `queen serve` keeps its
// own: 0 after a clean shutdown, 1 when the node could not start, 2 for a
// configuration it refuses.
const (
	exitOK      = 0
	exitUsage   = 1 // bad arguments or flags, or a local file that cannot be read
	exitRefused = 2 // the server (or Kafka broker) refused the request: 4xx, an item refused, not found
	exitServer  = 3 // the server failed (5xx), was not ready, or could not be reached
)

// cliError is an error that says which exit code it ends the command with.
// quiet errors were reported already (serve logs its own).
type cliError struct {
	code  int
	msg   string
	quiet bool
}

func (e *cliError) Error() string { return e.msg }

func usageError(format string, args ...any) error {
	return &cliError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

func refusedError(format string, args ...any) error {
	return &cliError{code: exitRefused, msg: fmt.Sprintf(format, args...)}
}

func serverError(format string, args ...any) error {
	return &cliError{code: exitServer, msg: fmt.Sprintf(format, args...)}
}

// execute runs the command line and returns the process's exit code.
// Nothing here opens a port or a data directory unless serve runs.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ce *cliError
	if errors.As(err, &ce) {
		if !ce.quiet {
			fmt.Fprintf(stderr, "queen: %s\n", ce.msg)
		}
		return ce.code
	}
	// Errors cobra finds itself: unknown commands and flags, wrong
	// argument counts.
	fmt.Fprintf(stderr, "queen: %v\nRun 'queen --help' for usage.\n", err)
	return exitUsage
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "queen",
		Short: "queen: a message queue broker with a native HTTP API and a Kafka-compatible port",
		Long: `queen runs a broker node (with no command, or 'queen serve'), and talks to a
running node: queues, messages, consumer groups, dead letters, KV, cluster
membership (HTTP, --url or QUEEN_URL) and topics (Kafka port, --brokers or
QUEEN_BROKERS). Settings of a node come from environment variables: see
'queen config'. Exit codes: 0 ok, 1 usage, 2 refused by the server,
3 server error or unreachable.`,
		Args:          cobra.NoArgs,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          serveCommand,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetVersionTemplate(buildInfo().line() + "\n")
	root.AddCommand(
		&cobra.Command{
			Use:   "serve",
			Short: "Run a broker node (the same as no command); settings from the environment",
			Long: `Run a broker node: the HTTP API (PORT, 6632), the Kafka port (QUEEN_KAFKA_ADDR,
9092) and raft (QUEEN_RAFT_LISTEN, 7400), data in QUEEN_RAFT_DIR (./queen-data).
Every setting is an environment variable: 'queen config' lists them with their
defaults. SIGTERM or SIGINT drains and stops the node. Exits 0 after a clean
shutdown, 1 when the node cannot start, 2 for a configuration it refuses.`,
			Args: cobra.NoArgs,
			RunE: serveCommand,
		},
		newVersionCommand(),
		newConfigCommand(),
	)
	cf := &clientFlags{}
	root.AddCommand(newQueuesCommand(cf), newPushCommand(cf), newPopCommand(cf), newAckCommand(cf),
		newGroupsCommand(cf), newDLQCommand(cf), newKVCommand(cf), newClusterCommand(cf), newStandbyCommand(cf),
		newTopicsCommand(), newBenchCommand())
	return root
}

func serveCommand(*cobra.Command, []string) error {
	if code := run(); code != 0 {
		return &cliError{code: code, msg: "serve failed", quiet: true}
	}
	return nil
}

// commit is the revision the binary was built from when the build sets it
// (-ldflags "-X main.commit=..."); otherwise it comes from Go's own
// stamping (vcs.revision), which a build with -buildvcs=false leaves out.
var commit string

// versionInfo is what `queen version` prints.
type versionInfo struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// buildInfo reads the commit the binary was built from (Go stamps
// vcs.revision when it builds inside a git checkout).
func buildInfo() versionInfo {
	v := versionInfo{Version: version, Commit: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if commit != "" {
		v.Commit = commit
	} else if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

func (v versionInfo) line() string {
	commit := v.Commit
	if v.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("queen %s commit %s %s %s", v.Version, commit, v.Go, v.Platform)
}

func newVersionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildInfo()
			if asJSON {
				return writeJSONValue(cmd.OutOrStdout(), v)
			}
			fmt.Fprintln(cmd.OutOrStdout(), v.line())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// envOr is the CLI's own settings (QUEEN_URL, QUEEN_BROKERS, ...): they
// say where a node is, and never reach a node's Config.
func envOr(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}
